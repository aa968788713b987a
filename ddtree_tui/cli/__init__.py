"""Argument parsing only: every mode is a function elsewhere that takes the parsed namespace and returns
an exit code (0 success, 1 the work ran and something failed, 2 bad usage or configuration)."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from ddtree_tui.lib import paths
from ddtree_tui.lib.heap import freeze_imports

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away

# mode -> "module:function"; each function takes the argparse namespace and returns an exit code
HANDLERS: dict[str, str] = {
    "tui": "ddtree_tui.cli.tui:cli_main",
    "run-bench": "ddtree_tui.cli.bench:cli_main",
    "status": "ddtree_tui.cli.status:status_main",
    "smoke": "ddtree_tui.cli.smoke:smoke_main",
    "launch": "ddtree_tui.cli.services:cli_main",
    "kill": "ddtree_tui.cli.services:cli_main",
    "restart": "ddtree_tui.cli.services:cli_main",
    "move": "ddtree_tui.cli.services:cli_main",
    "logs": "ddtree_tui.cli.services:cli_main",
    "patches": "ddtree_tui.cli.patches:cli_main",
    "doctor": "ddtree_tui.cli.doctor:cli_main",
    "todo": "ddtree_tui.cli.todo:cli_main",
    "sim": "ddtree_tui.cli.sim:cli_main",
    "report": "ddtree_tui.cli.report:cli_main",
    "serve": "ddtree_tui.cli.serve:serve_main",
    "web": "ddtree_tui.cli.serve:web_main",
    "attach": "ddtree_tui.cli.attach:cli_main",
    "replay": "ddtree_tui.cli.attach:replay_main",
    "record": "ddtree_tui.cli.attach:record_main",
    "sweep": "ddtree_tui.cli.sweep:cli_main",
}


def _globals(p: argparse.ArgumentParser, suppress: bool) -> None:
    d = argparse.SUPPRESS if suppress else None
    g = p.add_argument_group("global options (before or after the mode word)")
    g.add_argument(
        "--profile", action="append", metavar="FILE", default=d, help="a host profile (repeatable)"
    )
    g.add_argument("--profiles", metavar="DIR", default=d, help="a directory of host profiles (*.toml)")
    g.add_argument("--todos", metavar="FILE", default=d, help=f"todo file (default {paths.TODOS})")
    if not suppress:  # the TUI's modes (tui, --attach, --replay, --record) are top-level; `web` adds its own
        _theme_arg(g, None)
    g.add_argument(
        "--demo",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="this machine + simulated DFlash/DDTree services + replayed H200 telemetry",
    )


def _theme_arg(g: argparse._ActionsContainer, default: str | None) -> None:
    g.add_argument("--theme", metavar="NAME", default=default, help="UI theme: dark, light, high-contrast")


THEMED_MODES = {"tui", "attach", "replay", "record", "web"}


def _guard_args(p: argparse.ArgumentParser) -> None:
    """serve's and web's Host/Origin allow-lists and connection limits (collector/hostcheck.py, limits.py)."""
    g = p.add_argument_group("who may connect (DNS rebinding, cross-site pages, slow clients)")
    g.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="also accept this Host header (repeatable; no port: any port), e.g. for an ssh forward",
    )
    g.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="SCHEME://HOST[:PORT]",
        help="also accept requests and WebSockets from this page origin (repeatable)",
    )
    g.add_argument(
        "--max-connections",
        type=int,
        default=256,
        metavar="N",
        help="open connections at most; more are answered 503 (default 256)",
    )
    g.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds a client has to send a request's headers (default 10)",
    )


def _record_args(p: argparse.ArgumentParser, suppress: bool) -> None:
    """The TUI's and serve's record/replay options; `suppress`: leave unset ones out of the namespace (a
    subcommand's copy must not overwrite the top-level parser's value)."""
    g = p.add_argument_group("record and replay a session (the TUI and serve)")
    for flag, kind, metavar, default, what in (
        ("--record", str, "FILE", None, "record snapshots and events (gzip, bounded)"),
        ("--record-max-mb", float, "MB", 200.0, "stop recording past this size"),
        ("--replay", str, "FILE", None, "play a recording back, labelled REPLAY"),
        ("--speed", float, "X", 1.0, "replay speed (4: four times as fast)"),
    ):
        g.add_argument(
            flag, type=kind, metavar=metavar, default=argparse.SUPPRESS if suppress else default, help=what
        )


GLOBAL_FLAGS = {"--demo"}
GLOBAL_VALUES = {
    "--profile",
    "--profiles",
    "--todos",
}  # --theme is not: it is no option of status, sweep, ...


def hoist_globals(argv: Sequence[str]) -> list[str]:
    """Global options moved in front of the mode word, so `patches status --demo local` parses like
    `--demo patches status local` (argparse had already closed the optional positionals at `--demo` and
    then rejected `local` with the top-level usage)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        a = args[i]
        if a == "--":
            rest += args[i:]
            break
        if a in GLOBAL_FLAGS or (a.split("=", 1)[0] in GLOBAL_VALUES and "=" in a):
            front.append(a)
        elif a in GLOBAL_VALUES and i + 1 < len(args):
            front += [a, args[i + 1]]
            i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


def _workers_arg(v: str) -> int | str:
    """--workers: "auto" or a whole number (checked against its bound by the bench handler)."""
    if v.strip().lower() == "auto":
        return "auto"
    try:
        return int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{v!r}: a number of processes or auto") from None


def _version() -> str:
    from ddtree_tui import __version__

    return f"ddtree-tui {__version__}"


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows `(default: X)` on every option that has one worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS, []) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False,  # `sweep apply --to` is not an abbreviation of the global --todos
        prog="ddtree-tui",
        description="Deploy, watch and benchmark DFlash / DDTree SGLang services on a few GPU hosts. "
        "Without a mode word it starts the terminal UI.",
        formatter_class=_Help,
    )
    p.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    _globals(p, suppress=False)
    a = p.add_argument_group("attach to a collector (ddtree-tui serve)")
    a.add_argument("--attach", metavar="URL", default=None, help="run the TUI on a collector's data, e.g. "
                   "http://127.0.0.1:9464 (no ssh connections of its own)")  # fmt: skip
    a.add_argument("--token-file", metavar="FILE", default=None, help="the collector's bearer token file")
    a.add_argument("--readonly", action="store_true", help="the TUI takes no actions (no launch, kill, move, "
                   "bench or todo edit); implied by --replay and by --attach without --token-file")  # fmt: skip
    _record_args(p, suppress=False)
    from ddtree_tui.bench.defaults import DEFAULT_MAX_NEW_TOKENS  # the one default (the TUI dialog's too)

    b = p.add_argument_group("headless benchmark (--run-bench)")
    b.add_argument("--run-bench", action="store_true", help="run a benchmark headless; table on stdout")
    b.add_argument("--services", metavar="HOST/SVC,...", help="services to compare (default: all)")
    b.add_argument(
        "--prompts",
        metavar="SET|FILE.jsonl",
        default="seed3",
        help="seed3, agentic, longctx, a FILE.jsonl, gsp:G,P,SYS,Q[,OUT] or sharegpt:FILE[,gpt-len]",
    )
    b.add_argument("--repeats", type=int, default=1, metavar="N", help="measured requests per prompt")
    b.add_argument("--warmup", type=int, default=1, metavar="N", help="unmeasured requests first")
    b.add_argument(
        "--warmup-tokens",
        type=int,
        metavar="N",
        help="new tokens a warm-up request asks for at most (default 64; 0: as many as a measured one)",
    )
    b.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="requests in flight at once (= --load concurrency:N)",
    )
    b.add_argument(
        "--load",
        metavar="SHAPE",
        help="sync | concurrency:1,2,4,8 | rate:R | poisson:R[,seed] | sweep (README: Load shapes)",
    )
    b.add_argument("--duration", metavar="S", help="per service per level: 90, 90s, 30m, 2h")
    b.add_argument("--requests", type=int, metavar="N", help="counted requests per service per level")
    b.add_argument("--slo", metavar="ttft=200ms,tpot=20ms", help="SLOs for goodput (ttft, tpot, itl, e2e)")
    b.add_argument("--no-saturation-stop", action="store_true", help="run every level even after saturation")
    b.add_argument("--sessions", type=int, metavar="N", help="agentic: N closed-loop conversations at once")
    b.add_argument("--turns", type=int, metavar="T", help="agentic: turns a session (default 6)")
    b.add_argument(
        "--think-time", type=float, metavar="S", help="agentic: seconds between a reply and the next turn"
    )
    b.add_argument(
        "--soak", action="store_true", help="hold the first --load level for --duration, in windows"
    )
    b.add_argument("--window", metavar="S", help="soak window (default 10s); implies --soak")
    b.add_argument(
        "--soak-log",
        metavar="FILE",
        help="windows appended as JSON lines (default: --json FILE.windows.jsonl)",
    )
    b.add_argument(
        "--workers",
        type=_workers_arg,
        default="auto",
        metavar="N|auto",
        help="client processes (default auto: one per few thousand chunks/s the warm-up plans, up to the cores)",
    )
    b.add_argument(
        "--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS, metavar="N", help="tokens per answer"
    )
    b.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0: greedy)")
    b.add_argument(
        "--api",
        choices=["generate", "chat", "completions"],
        default="generate",
        help="SGLang /generate, OpenAI /v1/chat/completions or /v1/completions",
    )
    b.add_argument(
        "--url",
        metavar="URL[,URL2...]",
        help="bench running servers directly (e.g. http://127.0.0.1:30000), no profile needed",
    )
    b.add_argument(
        "--model", metavar="NAME", help='the OpenAI "model" field (default: what /v1/models lists)'
    )
    b.add_argument(
        "--ignore-eos",
        action="store_true",
        help="send ignore_eos (SGLang's sampling parameter; always sent on /generate, only then on OpenAI APIs)",
    )
    b.add_argument("--timeout", type=float, default=None, help="per-request timeout, seconds")
    b.add_argument(
        "--max-line-bytes", metavar="SIZE", help="longest SSE line read (default 16M): longer fails it"
    )
    b.add_argument(
        "--max-response-bytes", metavar="SIZE", help="most bytes one response may send (default 8G)"
    )
    b.add_argument(
        "--read-tick-ms",
        type=float,
        metavar="MS",
        help="read flowing streams together every MS ms, each read stamped by the kernel on arrival (default "
        "5; 0: one read per readable socket, stamped when it returns)",
    )
    b.add_argument("--baseline", metavar="HOST/SVC", help="Δ columns relative to it (default: the first)")
    b.add_argument(
        "--force",
        action="store_true",
        help="measure a service whose port another process holds (recorded as forced, never verified)",
    )
    # --- issue 26 (W-GPU): GPU telemetry / energy, per-request spec details ---
    b.add_argument(
        "--energy",
        action="store_true",
        help="sample the services' GPUs through the run from the fleet's telemetry: GPU numbers per window, "
        "energy, J/token, J per request (not for --url targets)",
    )
    b.add_argument(
        "--spec-details",
        action="store_true",
        help="--api chat/completions: ask SGLang for each request's spec details (return_spec_tokens_details)",
    )
    b.add_argument("--json", dest="json_out", metavar="FILE", help="write the run as JSON (schema in README)")
    b.add_argument("--csv", dest="csv_out", metavar="FILE", help="write the per-prompt rows as CSV")
    b.add_argument("--html", dest="html_out", metavar="FILE", help="a self-contained HTML report of the run")
    b.add_argument("--history", metavar="FILE", help=f"history file (default {paths.BENCH_HISTORY})")
    # --- workloads (issue 26): trace replay, arrival caps, cancellation, the seed (README: Workloads) --------
    w = p.add_argument_group(
        "benchmark workloads (--run-bench; prompts also gsp:G,P,SYS,Q[,OUT], sharegpt:FILE)"
    )
    w.add_argument("--trace", metavar="FILE.jsonl", help="replay a mooncake-format trace at its timestamps")
    w.add_argument("--trace-speed", type=float, metavar="F", help="trace timestamps / F (2: twice as fast)")
    w.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="open loop (rate, poisson, gamma, ramp, trace): at most N in flight",
    )
    w.add_argument(
        "--cancel",
        metavar="FRACTION[,DELAY]",
        help="abort that share of requests DELAY (default 0.5 s) after sending",
    )
    w.add_argument(
        "--seed",
        dest="bench_seed",
        type=int,
        metavar="N",
        help="seed of generated prompts, arrivals, cancellations",
    )
    # --- issue 26 (w-server): time slices, server metrics, cache reset, over-saturation test ---------------
    w = p.add_argument_group("time slices, server metrics, cache reset, over-saturation (--run-bench)")
    w.add_argument(
        "--slice", metavar="S", help="every metric also per window of S (5s, 1m); a soak: its --window"
    )
    w.add_argument(
        "--server-metrics",
        action="store_true",
        help="scrape each server's /metrics during the run (log fallback)",
    )
    w.add_argument("--server-metrics-every", metavar="S", help="seconds between scrapes (default 2s)")
    w.add_argument(
        "--flush-cache", action="store_true", help="POST /flush_cache (vLLM /reset_prefix_cache) before the run "
        "and each level",
    )  # fmt: skip
    w.add_argument(
        "--saturation-test", choices=["fixed", "trend", "either"], default=None,
        help="what stops a ladder: the fixed rule (default), the Mann-Kendall trend test, or either",
    )  # fmt: skip
    w.add_argument(
        "--saturation-alpha", type=float, default=None, metavar="A", help="the test's level (0.05)"
    )
    w.add_argument(
        "--saturation-window", type=int, default=None, metavar="N", help="requests in its window (40; 10-500)"
    )
    w.add_argument(
        "--slices-csv", metavar="FILE", help="the slices (and server figures) as CSV, any run kind"
    )

    sub = p.add_subparsers(dest="mode", metavar="MODE")

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_, formatter_class=_Help, allow_abbrev=False)
        _globals(sp, suppress=True)
        return sp

    sp = add("status", "one snapshot of hosts, GPUs and services, then exit")
    sp.add_argument("--json", action="store_true", help="print the documented JSON object (schema 1)")
    sp.add_argument("--timeout", type=float, default=8.0, help="seconds to wait for hosts and first samples")

    for name, what in (
        ("launch", "launch a service and wait until it is ready"),
        ("kill", "stop a service we launched and wait until it is gone"),
        ("restart", "kill then launch with the same spec (redeploy)"),
    ):
        sp = add(name, what)
        sp.add_argument("service", metavar="HOST/SVC", help="host profile name / service name")
        sp.add_argument("--timeout", type=float, default=None, help="seconds to wait for the result")
        switches = (
            ("--dry-run", "print the command exactly as it would run"),
            ("--force", "launch even when the host's SGLang parser rejects the command line"),
        )
        for flag, what in switches if name != "kill" else ():
            sp.add_argument(flag, action="store_true", help=what)
    sp = add("smoke", "one short streaming request to a service: ok or why not")
    sp.add_argument("service", metavar="HOST/SVC|URL", help="a profile's service, or a server's base URL")
    sp.add_argument(
        "--api",
        choices=["generate", "chat", "completions"],
        default="generate",
        help="which HTTP API to call",
    )
    sp.add_argument("--model", metavar="NAME", help='the OpenAI "model" field (default: from /v1/models)')
    sp.add_argument("--prompt", default="Say hello in one short sentence.", metavar="TEXT", help="the prompt")
    sp.add_argument("--max-new-tokens", type=int, default=32, metavar="N", help="tokens to generate")
    sp.add_argument("--timeout", type=float, default=30.0, help="seconds for the whole request")
    sp.add_argument("--json", action="store_true", help="print the result as a JSON object")
    sp.add_argument(
        "--force",
        action="store_true",
        help="send it even when the port's listener is not the service we launched (said so in the result)",
    )

    sp = add("move", "launch the same service spec on another host, then kill the old one")
    sp.add_argument("service", metavar="HOST/SVC")
    sp.add_argument("to_host", metavar="TOHOST", help="the host profile to move it to")
    sp.add_argument("--timeout", type=float, default=None, help="seconds to wait for the new one")

    sp = add("logs", "tail a service's log")
    sp.add_argument("service", metavar="HOST/SVC")
    sp.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    sp.add_argument("-n", "--lines", type=int, default=40, help="lines of the tail to print first")

    sp = add("patches", "patch sets for a host's SGLang")
    sp.add_argument("action", choices=["status", "apply", "revert", "list"], help="what to do")
    sp.add_argument("host", nargs="?", metavar="HOST", help="host profile name")
    sp.add_argument("patch", nargs="?", metavar="NAME", help="patch set name (see `patches list`)")
    sp.add_argument("--patches-dir", default=None, help="directory of patch sets (default ./patches)")

    sp = add("doctor", "preflight checks of a host's environment")
    sp.add_argument("host", nargs="?", metavar="HOST", help="host to check (default: every host)")
    sp.add_argument("--json", action="store_true", help="print the findings as JSON")

    sp = add("todo", "the todowrite-compatible checklist")
    sp.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=["list", "add", "start", "done", "cancel", "check"],
        help="what to do",
    )
    sp.add_argument("arg", nargs="?", metavar="TEXT|N", help="the text to add, or the item number")
    sp.add_argument("--priority", choices=["high", "medium", "low"], default="medium", help="for add")
    sp.add_argument(
        "--check", dest="check_expr", metavar="EVIDENCE", help="e.g. 'service ct200/dflash ready'"
    )
    sp.add_argument("--json", action="store_true", help="print the list as JSON")

    sp = add("report", "one or more run JSON files: the aligned comparison, or a self-contained HTML report")
    sp.add_argument("runs", nargs="+", metavar="RUN.json",
                    help="files written by --run-bench --json, or a sweep's results.json")  # fmt: skip
    sp.add_argument("--html", dest="html_out", metavar="FILE", help="write the HTML report here")

    from ddtree_tui.cli.sweep_args import add_arguments as _sweep_arguments

    _sweep_arguments(add("sweep", "the tuning lab: redeploy a service over settings, measure, rank, apply"))

    sp = add("sim", "run one simulated SGLang server (always labelled simulated)")
    sp.add_argument(
        "--algorithm", choices=["dflash", "ddtree", "baseline"], default="dflash", help="what to imitate"
    )
    # dest differs from "mode": the subparsers' own dest is "mode" and would be overwritten
    sp.add_argument(
        "--mode", dest="sim_mode", choices=["linear", "shadow-linear", "tree"], help="DDTree mode"
    )
    sp.add_argument("--port", type=int, required=True, help="port to listen on")
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on")
    sp.add_argument("--accept-length", type=float, default=None, help="mean accepted tokens per verify pass")
    sp.add_argument("--decode-rate", type=float, default=40.0, help="verify passes per second")
    sp.add_argument("--load-time", type=float, default=2.0, help="seconds /health answers 503")
    sp.add_argument("--seed", type=int, default=0, help="random seed (same seed, same output)")
    sp.add_argument("--model-path", default="sim/Qwen3.6-35B-A3B", help="the model name it reports")
    sp.add_argument(
        "--incremental-streaming-output", action="store_true", help="stream deltas, not full text"
    )
    sp.add_argument(
        "--decode-log-interval", type=int, default=40, help="a Decode batch log line every N passes"
    )
    sp.add_argument("--fault", action="append", default=[], metavar="KIND[=ARG]", help="inject a fault")
    sp.add_argument("--block-size", "--speculative-dflash-block-size", "--speculative-num-draft-tokens",
                    dest="block_size", type=int, default=None,
                    help="DFlash block: max tokens one verify pass emits (16); sets the accept length")  # fmt: skip
    sp.add_argument("--draft-window", "--speculative-dflash-draft-window-size", dest="draft_window", type=int,
                    default=None, help="DFlash drafter's context window in tokens (unset: all)")  # fmt: skip
    d = sp.add_argument_group("DDTree model (env SGLANG_DDTREE_MAX_TOPK, SGLANG_DDTREE_DEPTH_BONUS)")
    d.add_argument("--budget", "--speculative-ddtree-budget", dest="budget", type=int, default=None,
                   help="tree node budget: accept length and step time")  # fmt: skip
    d.add_argument("--hybrid", action="store_true", help="the target is a hybrid GDN/Mamba model")
    d.add_argument("--allow-hybrid-unsafe", action="store_true", help="allow tree verify on a hybrid model")
    r = sp.add_argument_group("behave like the real server (constants and sources: ddtree_tui/sim/config.py)")
    r.add_argument(
        "--realistic", action="store_true", help="SGLang 0.5.23's health latency, prefill, batching"
    )
    r.add_argument("--health-latency", type=float, default=None, metavar="S", help="seconds /health takes")
    r.add_argument("--prefill-rate", type=float, default=None, metavar="TOK/S", help="prefill speed (TTFT)")
    r.add_argument("--batch-slowdown", action="store_true", help="step time grows with the running batch")
    r.add_argument("--kv-capacity", type=int, default=None, metavar="TOKENS", help="abort (503) beyond it")
    r.add_argument(
        "--max-running-requests", type=int, default=None, metavar="N", help="more than N wait in a queue"
    )
    r.add_argument(
        "--disconnect-abort", type=float, default=None, metavar="S",
        help="a stream whose client went decodes on S s, then aborts (SGLang 0.5.23: 2)",
    )  # fmt: skip
    d = sp.add_argument_group("inject drift (for soak tests; seconds from the first request)")
    d.add_argument(
        "--slowdown-after", type=float, default=None, metavar="S", help="steps slow down after S s"
    )
    d.add_argument("--slowdown-factor", type=float, default=None, metavar="X", help="step time × X after it")
    d.add_argument(
        "--mem-creep-after", type=float, default=None, metavar="S", help="GPU memory creeps after S s"
    )
    d.add_argument("--mem-creep", type=float, default=None, metavar="MIB/S", help="creep rate (GET /sim/gpu)")
    r.add_argument("--reasoning", action="store_true", help="chat: thinking as delta.reasoning_content first")
    r.add_argument("--usage-on-finish", action="store_true", help="OpenAI: usage on the finish chunk")
    r.add_argument("--no-done", action="store_true", help="OpenAI: no data: [DONE] at the end")
    r.add_argument("--detail-errors", action="store_true", help='errors as {"detail": ...}')
    r.add_argument(
        "--strict-openai", action="store_true", help="422 for unknown fields, 400 for another model"
    )
    r.add_argument(
        "--openai-style",
        choices=["sglang", "transformers"],
        default=None,
        help="transformers: all four above",
    )
    # issue 26 (w-server): a server started without --enable-metrics (its /metrics answers 404)
    r.add_argument("--no-metrics", action="store_true", help="GET /metrics answers 404 (no --enable-metrics)")

    sp = add("serve", "a collector: one fleet served as /metrics, /snapshot, /events for Prometheus and TUIs")
    sp.add_argument("--listen", default="127.0.0.1:9464", metavar="HOST:PORT", help="default 127.0.0.1:9464")
    sp.add_argument(
        "--token-file",
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="bearer token file (0600; created when missing)",
    )
    sp.add_argument(
        "--intents",
        action="store_true",
        help="accept launch/kill/restart/move/bench/todo over HTTP (bearer token; "
        f"{paths.COLLECTOR_TOKEN} unless --token-file)",
    )
    _record_args(sp, suppress=True)
    _guard_args(sp)

    sp = add("web", "the TUI in a browser (textual-serve), each tab attached to a collector")
    sp.add_argument(
        "--listen",
        dest="web_listen",
        default="127.0.0.1:8765",
        metavar="HOST:PORT",
        help="where to serve the page",
    )
    sp.add_argument(
        "--attach", default=argparse.SUPPRESS, metavar="URL", help="the collector (default :9464)"
    )
    sp.add_argument(
        "--token-file",
        dest="web_token_file",
        default=None,
        metavar="FILE",
        help="browser token file (0600; created when missing); needed off loopback",
    )
    sp.add_argument(
        "--collector-token-file",
        dest="token_file",
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="the collector's bearer token file",
    )
    _theme_arg(sp, argparse.SUPPRESS)
    _guard_args(sp)
    _fill_help(p)
    return p


DEST_HELP = {
    "service": "HOST/SVC: the host profile's name and the service's name",
    "timeout": "seconds to wait",
    "api": "which HTTP API to call",
}


def _fill_help(p: argparse.ArgumentParser) -> None:
    """Every option and argument carries a help text (a shared one by name where none was given)."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                _fill_help(sp)
        elif not a.help and a.dest in DEST_HELP:
            a.help = DEST_HELP[a.dest]


@contextlib.contextmanager
def _no_gc(freeze: bool = False, headless: bool = False) -> Iterator[None]:
    """Imports make a few hundred thousand objects and little garbage: no collector passes over them while they
    load (issue 28). `freeze` (the terminal UI's modes, which live long): then one collection and gc.freeze,
    so that no later pass walks them either (measured: import plus 300,000 allocations, 1.29-1.45 s CPU with
    the collector on throughout, 0.97-1.17 s so; the app freezes its heap again 3 s after its first frame).
    `headless` (a mode's handler, not the terminal UI's): frozen without the collection (lib/heap.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.collect()
            gc.freeze()
        elif headless:
            freeze_imports()
        if was:
            gc.enable()


BOOT_ENV = (
    "DDTREE_CLI_BOOT"  # "plain": build every pydantic model as its class is made (a side-by-side measurement)
)


def _defer_model_builds() -> None:
    """Pydantic builds a model's validator when its class is made: a headless mode imports a few hundred models
    (doctor facts, host replies, every run kind's results, the intents) and uses a handful. Deferred (pydantic's
    own `defer_build`, set on the base before the handler's modules make theirs), each is built the first time
    it validates or is made; what a model means is unchanged. Not in the terminal UI's modes, which freeze their
    imported heap (`_no_gc`). bench worker processes do the same (`benchworker.py`). Issue 24."""
    import pydantic

    pydantic.BaseModel.model_config = pydantic.ConfigDict(defer_build=True)


def _freeze_at_exit() -> None:
    """At interpreter exit, before its own collections, everything still alive is frozen out of them: the
    objects are freed by their counts as the modules are torn down, without the collector first walking a
    few hundred thousand of them (measured: 0.1 s of a one-request `--run-bench`'s 0.55 s CPU, issue 26).
    Cyclic garbage left at exit is not finalized: our files are closed and renamed before a mode returns."""
    gc.freeze()


def _resolve(
    spec: str, freeze: bool = False, headless: bool = False
) -> Callable[[argparse.Namespace], int] | None:
    mod_name, func = spec.split(":")
    try:
        with _no_gc(freeze, headless=headless and not freeze):
            mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name and (e.name == mod_name or mod_name.startswith(e.name + ".")):
            return None
        raise
    return getattr(mod, func, None)


def main(argv: Sequence[str] | None = None) -> int:
    proclog = None
    if os.environ.get("DDTREE_PROC_LOG"):  # test-only count of process starts (cli/proclog.py)
        from ddtree_tui.cli.proclog import from_env

        proclog = from_env()
    with _no_gc():  # the parser imports the request models (their defaults)
        parser = build_parser()
    ns = parser.parse_args(hoist_globals(sys.argv[1:] if argv is None else argv))
    for attr, default in (("profile", None), ("profiles", None), ("todos", None), ("theme", None)):
        if not hasattr(ns, attr):
            setattr(ns, attr, default)
    if not hasattr(ns, "demo"):
        ns.demo = False
    mode = ns.mode or ("run-bench" if ns.run_bench else "tui")
    if ns.mode and ns.run_bench:
        parser.error("--run-bench is a mode of its own; do not combine it with a mode word")
    if ns.theme and mode not in THEMED_MODES:
        parser.error(f"--theme is an option of the terminal UI (and web), not of {mode}")
    if mode == "tui" and getattr(ns, "attach", None):
        mode = "attach"
    elif mode == "tui" and getattr(ns, "replay", None):
        mode = "replay"
    elif mode == "tui" and getattr(ns, "record", None):
        mode = "record"
    if mode not in THEMED_MODES and os.environ.get(BOOT_ENV) != "plain":
        _defer_model_builds()
    entry = argv is None  # the process's own command line (not a test's or cli_batch's call): its heap
    if entry:
        atexit.register(_freeze_at_exit)
    handler = _resolve(HANDLERS[mode], freeze=mode in THEMED_MODES, headless=entry)
    if handler is None:
        print(f"ddtree-tui: mode '{mode}' is not built yet", file=sys.stderr)
        return EXIT_USAGE
    if proclog is not None:
        proclog.started(mode)
    try:
        rc = int(handler(ns))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return rc
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`status --json | head -c 10`): no traceback, and nothing more to write
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())

"""Headless `ddtree-tui --run-bench`: progress on stderr, the table on stdout, JSON/CSV/history files.

Exit codes: 0 every counted request succeeded; 1 the run finished but a request failed (the others are still
measured and saved), a service could not be reached, or a file asked for (--json, --csv, the history)
could not be written; 2 bad usage or configuration; 130 interrupted (what
was measured is still printed and saved).

With `--demo` the demo profile's simulated services are started as child processes (bench/session.py) and stopped after;
otherwise the services must already be running (the TUI or `ddtree-tui launch` starts them). With
`--url http://127.0.0.1:PORT[,URL2...]` any running server is measured without a profile, on `--api generate`
(SGLang), `chat` or `completions` (any OpenAI-compatible server). Our own ports never go through a proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import signal
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from ddtree_tui import atomicio
from ddtree_tui.bench import bounds, history, report
from ddtree_tui.bench.agentic import DEFAULT_TURNS, TurnResult, agentic_table, load_conversations, run_agentic
from ddtree_tui.bench.load import LoadError, LoadSpec, Slo, parse_duration, parse_load, parse_slo
from ddtree_tui.bench.loadrun import LoadRun, LoadSettings, run_load
from ddtree_tui.bench.loadrun import table as load_table
from ddtree_tui.bench.models import BenchEvent, BenchRequest, BenchRun, BenchTarget
from ddtree_tui.bench.prompts import PromptError, load_prompts
from ddtree_tui.bench.runner import BenchUsageError, run_bench
from ddtree_tui.bench.session import (
    Session,
    make_targets,
    select_services,
    soak_probes,
    url_list,
    url_ref,
    url_targets,
)
from ddtree_tui.bench.soak import GpuWindow, SoakRun, SoakSettings, run_soak, soak_table
from ddtree_tui.bench.stream import StreamClient, set_default_limits
from ddtree_tui.cli.common import UsageError, profiles_of
from ddtree_tui.config import HostProfile, ServiceSpec

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_TIMEOUT = 300.0


def _err(msg: str) -> None:
    with contextlib.suppress(OSError):  # a terminal that hung up must not stop the run from saving
        print(f"ddtree-tui --run-bench: {msg}", file=sys.stderr, flush=True)


class Progress:
    """Human progress lines on stderr."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, ev: BenchEvent) -> None:
        with contextlib.suppress(OSError):  # a hung-up terminal (SIGHUP) must not abort the run
            self._show(ev)

    def _show(self, ev: BenchEvent) -> None:
        out = self.stream
        if ev.kind == "run_started":
            names = ", ".join(f"{t.ref} ({t.algorithm}/{t.mode or '-'})" for t in ev.targets)
            how = f"concurrency {ev.concurrency}"
            if ev.prompts_cycled:
                how += f" ({len(ev.prompts)} prompts cycled to keep {ev.concurrency} in flight)"
            if ev.workers > 1:
                how += f", {ev.workers} client worker processes"
            print(f"bench {ev.run_id}: {ev.total} requests over {names}; {how}", file=out, flush=True)
        elif ev.kind == "prompt_finished":
            r = ev.result
            where = f"{r.service} ({r.algorithm}/{r.mode or '-'}) {r.prompt_id} #{r.repeat + 1}"
            tag = "warm-up" if r.warmup else f"[{ev.done}/{ev.total}]"
            if r.ok:
                acc = f", accept {r.accept_length:.2f}" if r.accept_length is not None else ""
                ttft = f"{r.ttft_s * 1000:.0f} ms" if r.ttft_s is not None else "-"
                rate = f"{r.tok_s:.1f}" if r.tok_s is not None else "-"
                print(
                    f"{tag} {where}: {rate} tok/s, TTFT {ttft}{acc}, {r.output_tokens} tokens",
                    file=out,
                    flush=True,
                )
            else:
                print(f"{tag} {where}: FAILED: {r.error}", file=out, flush=True)
        elif ev.kind == "run_finished":
            run = ev.run
            aborted = f" ({run.aborted} aborted by the server)" if run.aborted else ""
            print(
                f"bench {run.id}: {run.status}, {run.failed} failed{aborted}, {run.wall_s or 0:.1f} s",
                file=out,
                flush=True,
            )
            if run.client_bound and run.client is not None:
                print(f"bench {run.id}: CLIENT-BOUND: {run.client.reason}", file=out, flush=True)


def save(run: BenchRun, ns: argparse.Namespace) -> list[str]:
    """Write --json, --csv and the history line; returns the problems (never raises for I/O)."""
    problems: list[str] = []
    outputs: list[tuple[str | None, Callable[[], Iterable[bytes]]]] = [
        (ns.json_out, lambda: report.iter_json(run)),  # streamed: a run of any size is never whole in memory
        (ns.csv_out, lambda: report.iter_csv(run)),
    ]
    for path, text in outputs:
        if not path:
            continue
        try:
            _atomic_write(Path(path), text())
        except OSError as e:
            problems.append(f"cannot write {path}: {e.strerror or e}")
    html_out = getattr(ns, "html_out", None)
    if html_out:
        from ddtree_tui.report.output import html_for_run

        try:
            html_for_run(run, html_out, source=ns.json_out)
        except OSError as e:
            problems.append(f"cannot write {html_out}: {e.strerror or e}")
    hist = _history_path(ns)
    try:
        history.append(run, hist)
    except OSError as e:
        problems.append(f"cannot append to history {hist}: {e.strerror or e}")
    return problems


def _atomic_write(path: Path, text: str | Iterable[bytes]) -> None:
    """Through the one shared writer: a special file (/dev/null, a FIFO) is written, never replaced."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    atomicio.write_file(path, text)


def build_request(ns: argparse.Namespace) -> BenchRequest:
    return BenchRequest(
        prompts=ns.prompts,
        repeats=ns.repeats,
        warmup=ns.warmup,
        concurrency=ns.concurrency,
        workers=getattr(ns, "workers", 1),
        max_new_tokens=ns.max_new_tokens,
        temperature=ns.temperature,
        ignore_eos=bool(getattr(ns, "ignore_eos", False)),
        api=ns.api,
        model=getattr(ns, "model", None),
        timeout=ns.timeout if ns.timeout is not None else DEFAULT_TIMEOUT,
        baseline=ns.baseline,
    )


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class LoadArgs:
    """--load, --duration, --requests, --slo parsed."""

    spec: LoadSpec
    duration_s: float | None = None
    requests: int | None = None
    slo: Slo | None = None
    stop_on_saturation: bool = True
    soak: bool = False
    window_s: float = 10.0
    soak_log: str | None = None

    def load_settings(self) -> LoadSettings:
        return LoadSettings(
            duration_s=self.duration_s,
            requests=self.requests,
            slo=self.slo,
            stop_on_saturation=self.stop_on_saturation,
        )


def load_args(ns: argparse.Namespace) -> LoadArgs | None:
    """The load shape asked for, or None for a plain run (--concurrency N alone stays the one-level run);
    LoadError names the option that is wrong."""
    text = getattr(ns, "load", None)
    dur = getattr(ns, "duration", None)
    nreq = getattr(ns, "requests", None)
    slo = getattr(ns, "slo", None)
    soak = bool(getattr(ns, "soak", False))
    window = getattr(ns, "window", None)
    if text is None and dur is None and nreq is None and slo is None and not soak and window is None:
        return None
    if (soak or window is not None) and dur is None:
        raise LoadError("--soak needs --duration (e.g. --duration 30m)")
    if (soak or window is not None) and nreq is not None:
        raise LoadError("--soak runs for --duration, not --requests")
    if text is None:
        text = f"concurrency:{ns.concurrency}" if ns.concurrency > 1 else "sync"
    spec = parse_load(text)
    if dur is not None and nreq is not None:
        raise LoadError("give --duration or --requests, not both")
    if nreq is not None and nreq < 1:
        raise LoadError(f"--requests {nreq}: must be at least 1")
    return LoadArgs(
        spec=spec,
        duration_s=parse_duration(dur) if dur is not None else None,
        requests=nreq,
        slo=parse_slo(slo) if slo is not None else None,
        stop_on_saturation=not getattr(ns, "no_saturation_stop", False),
        soak=soak or window is not None,
        window_s=parse_duration(window, "--window") if window is not None else 10.0,
        soak_log=getattr(ns, "soak_log", None),
    )


class LoadProgress(Progress):
    """Progress lines for a load run: one a level, and failures."""

    def _show(self, ev: Any) -> None:
        out = self.stream
        kind = getattr(ev, "kind", None)
        if kind == "level_started":
            print(f"load {ev.run_id}: level {ev.index + 1}/{ev.count} {ev.label}", file=out, flush=True)
        elif kind == "level_finished":
            for s in ev.result.services:
                thr = f"{s.output_throughput:.1f}" if s.output_throughput is not None else "-"
                ttft = f"{s.ttft_ms.p50:.0f} ms" if s.ttft_ms.p50 is not None else "-"
                sat = f" SATURATED ({s.saturation})" if s.saturated else ""
                print(
                    f"  {ev.result.label} {s.service}: {s.n} ok, {s.failed} failed, {thr} out tok/s, "
                    f"TTFT p50 {ttft}{sat}",
                    file=out,
                    flush=True,
                )
        elif kind == "prompt_finished" and not ev.result.ok:
            r = ev.result
            print(f"  {r.service} {r.prompt_id}: FAILED: {r.error}", file=out, flush=True)
        elif kind == "load_finished":
            run = ev.run
            print(
                f"load {run.id}: {run.status}, {len(run.levels)} level(s), {run.failed} failed, "
                f"{run.wall_s or 0:.1f} s",
                file=out,
                flush=True,
            )


async def _run_agentic(ns: argparse.Namespace, req: BenchRequest, targets: list[BenchTarget]) -> int:
    def on_turn(tr: TurnResult) -> None:
        with contextlib.suppress(OSError):
            what = (
                f"TTFT {tr.ttft_ms:.0f} ms, {tr.prompt_tokens} prompt tokens ({tr.cached_tokens} cached), "
                f"{tr.output_tokens} out"
                if tr.ok
                else f"FAILED: {tr.error}"
            )
            print(f"{tr.service} {tr.session} turn {tr.turn}: {what}", file=sys.stderr, flush=True)

    if req.api != "generate":
        from ddtree_tui.bench.runner import _with_model

        async with StreamClient() as client:
            targets = [await _with_model(client, t, req.model) for t in targets]
    run = await run_agentic(
        req,
        targets,
        sessions=ns.sessions,
        turns=getattr(ns, "turns", None) or DEFAULT_TURNS,
        think_time_s=getattr(ns, "think_time", None) or 0.0,
        dataset=None if ns.prompts == "agentic" else ns.prompts,
        on_turn=on_turn,
    )
    unsaved = _emit_shape_run(ns, run, agentic_table(run))
    return EXIT_FAIL if run.failed or unsaved else EXIT_OK


class SoakProgress(Progress):
    def _show(self, ev: Any) -> None:
        kind = getattr(ev, "kind", None)
        if kind == "soak_window":
            m = ev.metrics
            mem = sum(g.memory_used_mib or 0 for g in ev.probe.gpus) if ev.probe.gpus else None
            print(
                f"soak {ev.run_id}: window {ev.index} ({ev.start_s:.0f}-{ev.end_s:.0f} s) {ev.service}: "
                f"{m.n} ok, {m.failed} failed, {(m.output_throughput or 0):.1f} out tok/s, TTFT p50 "
                f"{(m.ttft_ms.p50 or 0):.0f} ms" + (f", GPU {mem:.0f} MiB" if mem is not None else ""),
                file=self.stream,
                flush=True,
            )
        elif kind == "prompt_finished" and not ev.result.ok:
            print(f"  {ev.result.service}: FAILED: {ev.result.error}", file=self.stream, flush=True)


async def _soak_settings(
    ns: argparse.Namespace,
    la: LoadArgs,
    sess: Session,
    targets: list[BenchTarget],
    chosen: list[tuple[HostProfile, ServiceSpec]],
) -> SoakSettings:
    """The soak's settings: each service's GPU probe, its window log (next to --json unless named) and the
    history, where the start line and each window go as they come."""
    probes = await soak_probes(sess, targets, chosen)

    async def probe(t: BenchTarget) -> tuple[list[GpuWindow], str | None]:
        return await probes[t.ref](t)

    log = la.soak_log or (ns.json_out + ".windows.jsonl" if ns.json_out else None)
    assert la.duration_s is not None
    return SoakSettings(
        duration_s=la.duration_s,
        window_s=la.window_s,
        slo=la.slo,
        log_path=Path(log) if log else None,
        gpu_probe=probe,
        history_path=_history_path(ns),
    )


async def _run_shape(
    ns: argparse.Namespace,
    req: BenchRequest,
    targets: list[BenchTarget],
    la: LoadArgs,
    stop: asyncio.Event,
    sess: Session,
    chosen: list[tuple[HostProfile, ServiceSpec]],
) -> int:
    """A load ladder or a soak, reported alike (table, --json, history, --html); a soak that drifted fails
    like a ladder with failed requests."""
    run: LoadRun | SoakRun
    if la.soak:
        settings = await _soak_settings(ns, la, sess, targets, chosen)
        run = await run_soak(req, targets, la.spec, settings, sess.hooks(SoakProgress(), stop))
        table, bad = soak_table(run), bool(run.failed or run.drift)
    else:
        run = await run_load(req, targets, la.spec, la.load_settings(), sess.hooks(LoadProgress(), stop))
        table, bad = load_table(run), bool(run.failed)
    unsaved = _emit_shape_run(ns, run, table)
    _write_load_html(ns, run)
    if run.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAIL if bad or unsaved else EXIT_OK


def _history_path(ns: argparse.Namespace) -> Path:
    return Path(ns.history) if getattr(ns, "history", None) else history.DEFAULT_HISTORY


def _emit_shape_run(ns: argparse.Namespace, run: history.ShapeRun, table: str) -> list[str]:
    """A load, soak or agentic run's table on stdout (a closed pipe ends it quietly), its --json file and
    its history line; returns what could not be written (said on stderr too)."""
    with contextlib.suppress(OSError):
        sys.stdout.write(table)
        sys.stdout.flush()
    problems: list[str] = []
    if ns.json_out:
        try:
            _atomic_write(Path(ns.json_out), itertools.chain(report.iter_json(run, 1, strict=True), [b"\n"]))
        except OSError as e:
            problems.append(f"cannot write {ns.json_out}: {e.strerror or e}")
    hist = _history_path(ns)
    try:
        history.append_shape(run, hist)
    except OSError as e:
        problems.append(f"cannot append to history {hist}: {e.strerror or e}")
    for p in problems:
        _err(p)
    return problems


def _write_load_html(ns: argparse.Namespace, run: LoadRun | SoakRun) -> None:
    path = getattr(ns, "html_out", None)
    if not path:
        return
    from ddtree_tui.report.loadhtml import write_load_html

    try:
        write_load_html(run, path)
    except OSError as e:
        _err(f"cannot write {path}: {e.strerror or e}")


async def _main(
    ns: argparse.Namespace,
    req: BenchRequest,
    chosen: list[tuple[HostProfile, ServiceSpec]],
    load: LoadArgs | None = None,
    agentic: bool = False,
) -> int:
    sess = Session()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        _err("interrupted: stopping, saving what was measured (Ctrl-C again to quit at once)")
        stop.set()
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGINT)

    # SIGHUP too: closing the terminal or `tmux kill-window` must save what was measured and stop the
    # demo's simulated servers, like Ctrl-C
    for sig in _STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    try:
        sims = [f"{h.name}/{s.name}" for h, s in chosen if ns.demo and h.is_local and s.launcher == "sim"]
        remote = sorted({h.name for h, _ in chosen if not h.is_local})
        what = [f"starting simulated {', '.join(sims)}"] if sims else []
        what += [f"connecting to {', '.join(remote)}"] if remote else []
        _err(f"preparing {len(chosen)} service(s){': ' + '; '.join(what) if what else ''}")
        try:
            if getattr(ns, "url", None):
                targets = await url_targets(url_list(ns.url))
            else:
                targets = await make_targets(sess, chosen, ns.demo, note=_err)
        except (RuntimeError, OSError) as e:
            _err(str(e))
            return EXIT_FAIL
        if stop.is_set():
            return EXIT_INTERRUPTED
        try:
            if agentic:
                return await _run_agentic(ns, req, targets)
            if load is not None:
                return await _run_shape(ns, req, targets, load, stop, sess, chosen)
            run = await run_bench(
                req, targets, on_event=Progress(), stop=stop, gates=sess.gates, where=sess.where
            )
        except BenchUsageError as e:
            _err(str(e))
            return EXIT_USAGE
    finally:
        sess.stop_sims()
        await sess.close_transports()
        for sig in _STOP_SIGNALS:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone: the files still get written
        sys.stdout.write(report.table(run))
        sys.stdout.flush()
    unsaved = save(run, ns)
    for p in unsaved:
        with contextlib.suppress(OSError):
            _err(p)
    if run.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAIL if run.failed or unsaved else EXIT_OK


def cli_main(ns: argparse.Namespace) -> int:
    for name, low in (
        ("repeats", 1),
        ("warmup", 0),
        ("concurrency", 1),
        ("max_new_tokens", 1),
        ("workers", 1),
    ):
        if getattr(ns, name, low) < low:
            _err(f"--{name.replace('_', '-')} must be at least {low}")
            return EXIT_USAGE
    # issue 25: every count has a bound, and the read limits reach this process and its workers (bench/bounds.py)
    problem = bounds.bench_args_problem(ns)
    if problem:
        _err(problem)
        return EXIT_USAGE
    if (limits := bounds.limits_of(ns)) is not None:
        set_default_limits(limits)
    if ns.timeout is not None and ns.timeout <= 0:
        _err("--timeout must be positive")
        return EXIT_USAGE
    if ns.temperature < 0:
        _err("--temperature must be >= 0")
        return EXIT_USAGE
    urls: list[str] = []
    try:
        if getattr(ns, "url", None):
            if ns.services or ns.demo:
                raise ValueError("--url benches running servers directly: leave out --services and --demo")
            urls = url_list(ns.url)
            chosen = []
        else:
            chosen = select_services(profiles_of(ns), ns.services)
    except (UsageError, ValueError) as e:  # the shared preamble's words for a bad profile
        _err(str(e))
        return EXIT_USAGE
    agentic = getattr(ns, "sessions", None) is not None
    try:
        if agentic:
            if ns.sessions < 1 or (getattr(ns, "turns", None) or 1) < 1:
                raise PromptError("--sessions and --turns must be at least 1")
            if (getattr(ns, "think_time", None) or 0.0) < 0:
                raise PromptError("--think-time must be >= 0")
            if ns.prompts != "agentic":
                load_conversations(ns.prompts)
        else:
            n = len(load_prompts(ns.prompts))
            if too_big := bounds.plan_problem(n, ns.repeats, len(urls) or len(chosen)):
                raise PromptError(too_big)
    except PromptError as e:
        _err(str(e))
        return EXIT_USAGE
    refs = [url_ref(u) for u in urls] if urls else [f"{h.name}/{s.name}" for h, s in chosen]
    if urls and ns.baseline and ns.baseline.rstrip("/") in urls:
        ns.baseline = url_ref(ns.baseline.rstrip("/"))
    if len(set(refs)) != len(refs):
        _err(f"a service is listed twice: {', '.join(refs)}")
        return EXIT_USAGE
    if ns.baseline and ns.baseline not in refs:
        _err(f"--baseline {ns.baseline} is not among the services ({', '.join(refs)})")
        return EXIT_USAGE
    if not ns.baseline and len(refs) > 1:
        ns.baseline = refs[0]  # deltas against the first service unless told otherwise
    try:
        req = build_request(ns)
    except ValidationError as e:
        for err in e.errors():
            opt = "--" + "-".join(str(x) for x in err.get("loc", ())).replace("_", "-")
            _err(
                f"{opt}: {str(err.get('msg', 'invalid value')).removeprefix('Value error, ')} (got {err.get('input')!r})"
            )
        return EXIT_USAGE
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    if agentic:
        if getattr(ns, "load", None) or getattr(ns, "soak", False):
            _err("--sessions runs closed-loop conversations: leave out --load and --soak")
            return EXIT_USAGE
        return asyncio.run(_main(ns, req, chosen, None, agentic=True))
    try:
        la = load_args(ns)
    except LoadError as e:
        _err(str(e))
        return EXIT_USAGE
    if la is not None and ns.csv_out:
        _err("--csv is for plain runs; a --load or --soak run writes --json (schema 2) and --html")
        return EXIT_USAGE
    return asyncio.run(_main(ns, req, chosen, la))

"""Headless `ddtree-tui --run-bench`: the command line parsed into one BenchRequest (a plain run) or
ShapeRequest (`--load`, `--soak`, `--sessions`), run through a `Fleet` like the TUI's and the collector's
runs (the fleet's bench desk, fleet/benching.py: same defaults, same targets, same rule for a stopped service);
progress on stderr (counted by bench/progress.py, as the TUI's bench pane), the table on stdout, the
JSON/CSV/HTML files here and the history line by the fleet.

Exit codes: 0 every counted request succeeded; 1 the run finished but a request failed (the others are still
measured and saved), a service could not be reached, or a file asked for (--json, --csv, the history)
could not be written; 2 bad usage or configuration; 130 interrupted (what
was measured is still printed and saved).

With `--demo` the profile's simulated services are launched through the fleet (its own lifecycle, in a
workdir of this run, on free ports when theirs are taken) and killed however the run ends (Ctrl-C, SIGTERM,
SIGHUP); otherwise the services must already be running (the TUI or `ddtree-tui launch` starts them). With
`--url http://127.0.0.1:PORT[,URL2...]` any running server is measured without a profile (the fleet has no
host then; fleet/benching.py says why a URL is a target of its own), on `--api generate` (SGLang), `chat` or
`completions` (any OpenAI-compatible server). Our own ports never go through a proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from ddtree_tui import atomicio
from ddtree_tui.bench import bounds, history, report
from ddtree_tui.bench.evloop import new_loop
from ddtree_tui.bench.load import MAX_TRACE_SPEED, LoadError, parse_duration, parse_load, parse_slo
from ddtree_tui.bench.models import BenchRequest, BenchRun, BenchUsageError, ShapeRequest
from ddtree_tui.bench.progress import BenchProgress
from ddtree_tui.bench.prompts import PromptError, load_conversations, load_prompts
from ddtree_tui.bench.results import LoadRun, ShapeRun, SoakRun, TurnResult
from ddtree_tui.bench.runoptions import RunKind, run_options, soak_window
from ddtree_tui.bench.tables import shape_table
from ddtree_tui.bench.urls import url_list, url_ref
from ddtree_tui.bench.workloads.base import WorkloadError
from ddtree_tui.bench.workloads.cancel import parse_cancel
from ddtree_tui.cli.args import BenchArgs
from ddtree_tui.cli.common import UsageError, handler, profiles_of
from ddtree_tui.config import HostProfile, ServiceSpec, find_service
from ddtree_tui.fleet import Fleet
from ddtree_tui.fleet.benching import BenchRefused
from ddtree_tui.fleet.benchprocs import worker_zygote
from ddtree_tui.lib import paths
from ddtree_tui.model.events import BenchEventWrap, BenchLiveWrap, FleetEvent, Notice

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _err(msg: str) -> None:
    with contextlib.suppress(OSError):  # a terminal that hung up must not stop the run from saving
        print(f"ddtree-tui --run-bench: {msg}", file=sys.stderr, flush=True)


# --- the request, built once ---------------------------------------------------------------------------------
def select_services(
    profiles: Sequence[HostProfile], services: str | None
) -> list[tuple[HostProfile, ServiceSpec]]:
    """`--services HOST/SVC,...` or every service of every profile; ValueError names what is unknown."""
    if services:
        refs = [s.strip() for s in services.split(",") if s.strip()]
        if not refs:
            raise ValueError("--services is empty")
        return [find_service(profiles, r) for r in refs]
    out = [(h, s) for h in profiles for s in h.service]
    if not out:
        raise ValueError("no services in the host profiles (add [[service]] tables or use --demo)")
    return out


def _shape_fields(ns: BenchArgs) -> dict[str, Any] | None:
    """The load shape asked for (ShapeRequest's fields), or None for a plain run (--concurrency N alone
    stays the one-level run); LoadError names the option that is wrong."""
    text, dur, nreq, slo, soak, window = ns.load, ns.duration, ns.requests, ns.slo, ns.soak, ns.window
    workload = _workload_fields(ns)  # issue 26: --trace, --max-concurrency, --cancel
    if workload.get("trace"):
        text = f"trace:{ns.trace_speed or 1.0:g}"
    if text is None and dur is None and nreq is None and slo is None and not soak and window is None:
        if not workload:
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
    soak = soak or window is not None
    log = ns.soak_log or (ns.json_out + ".windows.jsonl" if soak and ns.json_out else None)
    return {
        "load": spec.text,
        "duration_s": parse_duration(dur) if dur is not None else None,
        "requests": nreq,
        "slo": parse_slo(slo).text if slo is not None else None,
        "stop_on_saturation": not ns.no_saturation_stop,
        "soak": soak,
        "window_s": parse_duration(window, "--window") if window is not None else 10.0,
        "soak_log": log,
        **workload,
    }


def build_request(ns: BenchArgs, refs: Sequence[str] = (), urls: Sequence[str] = ()) -> BenchRequest:
    """The one request of this run: a ShapeRequest for --load / --soak / --sessions, else a BenchRequest.
    Options left out take the model's defaults (the TUI's and the collector's). ValidationError or
    LoadError for a bad value."""
    fields: dict[str, Any] = {
        "refs": list(refs), "urls": list(urls), "prompts": ns.prompts, "repeats": ns.repeats,
        "warmup": ns.warmup, "concurrency": ns.concurrency, "workers": 0 if ns.workers == "auto" else ns.workers,
        "max_new_tokens": ns.max_new_tokens, "temperature": ns.temperature,
        "ignore_eos": ns.ignore_eos, "api": ns.api, "model": ns.model,
        "baseline": ns.baseline, "force": ns.force,
    }  # fmt: skip
    if ns.warmup_tokens is not None:
        fields["warmup_tokens"] = ns.warmup_tokens
    if ns.trace:  # issue 26: a trace brings its own prompts
        fields["prompts"] = f"trace:{ns.trace}"
    if ns.timeout is not None:
        fields["timeout"] = ns.timeout
    shape = None if ns.sessions is not None else _shape_fields(ns)
    kind: RunKind = "agentic" if ns.sessions is not None else "plain" if shape is None else "load"
    if shape is not None and shape["soak"]:
        kind = "soak"
    # issue 26: energy, spec details, slices, server metrics, cache flush, saturation test, seed (the dialog's
    # rules too: bench/runoptions.py)
    fields.update(
        run_options(
            kind, api=ns.api, energy=ns.energy, spec_details=ns.spec_details, slice_text=ns.slice,
            server_metrics=ns.server_metrics, server_metrics_every=ns.server_metrics_every,
            flush_cache=ns.flush_cache, saturation_test=ns.saturation_test,
            saturation_alpha=ns.saturation_alpha, saturation_window=ns.saturation_window, seed=ns.bench_seed,
        )
    )  # fmt: skip
    if ns.sessions is not None:
        return ShapeRequest(
            **fields, sessions=ns.sessions, turns=ns.turns or 6, think_time_s=ns.think_time or 0.0
        )
    if shape is not None:
        if shape["soak"] and "slice_s" in fields:  # a soak's slices are its windows: one option, one width
            given = parse_duration(ns.window, "--window") if ns.window is not None else None
            shape["window_s"] = soak_window(fields["slice_s"], given)
    return ShapeRequest(**fields, **shape) if shape is not None else BenchRequest(**fields)


# --- workloads (issue 26): --trace, --trace-speed, --max-concurrency, --cancel, --seed ------------------------
def _workload_fields(ns: BenchArgs) -> dict[str, Any]:
    """ShapeRequest's workload fields asked for ({} when none); LoadError names the option."""
    out: dict[str, Any] = {}
    if ns.trace_speed is not None and not ns.trace:
        raise LoadError("--trace-speed needs --trace FILE")
    if ns.trace:
        if ns.load is not None:
            raise LoadError("--trace sends at the trace's timestamps: leave out --load")
        if ns.soak or ns.sessions is not None:
            raise LoadError("--trace is a load run of its own: leave out --soak and --sessions")
        if ns.trace_speed is not None and not 0 < ns.trace_speed <= MAX_TRACE_SPEED:
            raise LoadError(
                f"--trace-speed {ns.trace_speed:g}: a factor above 0 and at most {MAX_TRACE_SPEED:g}"
            )
        out["trace"] = ns.trace
    if ns.max_concurrency is not None:
        if not 1 <= ns.max_concurrency <= bounds.MAX_CONCURRENCY:
            raise LoadError(
                f"--max-concurrency {ns.max_concurrency}: a whole number 1…{bounds.MAX_CONCURRENCY}"
            )
        if not ns.trace and (ns.load is None or parse_load(ns.load).closed_loop):
            raise LoadError(
                "--max-concurrency caps an open loop: give --load rate:, poisson:, gamma: or ramp:, or --trace"
            )
        out["max_concurrency"] = ns.max_concurrency
    if ns.cancel is not None:
        try:
            out["cancel"] = parse_cancel(ns.cancel).text
        except WorkloadError as e:
            raise LoadError(str(e)) from None
        if ns.workers != "auto" and ns.workers > 1:
            raise LoadError("--cancel closes requests on the client's own loop: leave out --workers")
        if ns.soak or ns.sessions is not None:
            raise LoadError("--cancel is for --load and --trace runs")
    return out


# --- issue 26 (w-server): time slices (their options' rules are bench/runoptions.py, shared with the dialog) ------
def save_slices(run: BenchRun | ShapeRun, ns: BenchArgs) -> list[str]:
    """`--slices-csv FILE` (any run kind); the problems, never raised."""
    if not ns.slices_csv:
        return []
    from ddtree_tui.bench import slices

    try:
        _atomic_write(Path(ns.slices_csv), slices.iter_csv(run))
    except OSError as e:
        return [f"cannot write {ns.slices_csv}: {e.strerror or e}"]
    return []


def slices_text(run: BenchRun | ShapeRun) -> str:
    """The slices table printed after the run's own (empty when the run is not sliced)."""
    from ddtree_tui.bench import slices

    return slices.table(run)


# --- progress ------------------------------------------------------------------------------------------------
class Progress:
    """Human progress lines on stderr from the fleet's events, counted by the one progress reducer (the
    TUI's bench pane folds the same events the same way); the fleet's warnings as they come."""

    def __init__(self, shaped: bool = False, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.progress = BenchProgress()
        if shaped:
            self.progress.reset_load("starting")

    def __call__(self, ev: FleetEvent) -> None:
        with contextlib.suppress(OSError):  # a hung-up terminal (SIGHUP) must not abort the run
            if isinstance(ev, BenchEventWrap):
                self.progress.apply(ev.event)
                self._show(ev.event)
            elif isinstance(ev, Notice) and ev.severity != "information":
                _err(ev.text)

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _show(self, ev: Any) -> None:
        kind = getattr(ev, "kind", None)
        if kind == "run_started":
            names = ", ".join(f"{t.ref} ({t.algorithm}/{t.mode or '-'})" for t in ev.targets)
            how = f"concurrency {ev.concurrency}"
            if ev.prompts_cycled:
                how += f" ({len(ev.prompts)} prompts cycled to keep {ev.concurrency} in flight)"
            if ev.workers > 1:
                how += f", {ev.workers} client worker processes"
            self._line(f"bench {ev.run_id}: {ev.total} requests over {names}; {how}")
        elif kind == "prompt_finished":
            self._finished(ev.result)
        elif kind == "run_finished":
            run = ev.run
            aborted = f" ({run.aborted} aborted by the server)" if run.aborted else ""
            self._line(f"bench {run.id}: {run.status}, {run.failed} failed{aborted}, {run.wall_s or 0:.1f} s")
            if run.client_bound and run.client is not None:
                self._line(f"bench {run.id}: CLIENT-BOUND: {run.client.reason}")
        elif kind == "level_started":
            self._line(f"load {ev.run_id}: level {ev.index + 1}/{ev.count} {ev.label}")
        elif kind == "level_finished":
            for s in ev.result.services:
                thr = f"{s.output_throughput:.1f}" if s.output_throughput is not None else "-"
                ttft = f"{s.ttft_ms.p50:.0f} ms" if s.ttft_ms.p50 is not None else "-"
                sat = f" SATURATED ({s.saturation})" if s.saturated else ""
                if not s.reached:
                    sat = f" NOT REACHED ({s.shortfall})"
                self._line(
                    f"  {ev.result.label} {s.service}: {s.n} ok, {s.failed} failed, {thr} out tok/s, "
                    f"TTFT p50 {ttft}{sat}"
                )
        elif kind == "load_finished":
            run = ev.run
            self._line(
                f"load {run.id}: {run.status}, {len(run.levels)} level(s), {run.failed} failed, "
                f"{run.wall_s or 0:.1f} s"
            )
            for ref, k in run.knee_lines().items():
                self._line(f"load {run.id}: knee {ref}: {k}")
        elif kind == "soak_window":
            m = ev.metrics
            mem = ev.gpu_memory_mib()
            self._line(
                f"soak {ev.run_id}: window {ev.index} ({ev.start_s:.0f}-{ev.end_s:.0f} s) {ev.service}: "
                f"{m.n} ok, {m.failed} failed, {(m.output_throughput or 0):.1f} out tok/s, TTFT p50 "
                f"{(m.ttft_ms.p50 or 0):.0f} ms" + (f", GPU {mem:.0f} MiB" if mem is not None else "")
            )
        elif isinstance(ev, TurnResult):
            what = (
                f"TTFT {ev.ttft_ms:.0f} ms, {ev.prompt_tokens} prompt tokens ({ev.cached_tokens} cached), "
                f"{ev.output_tokens} out"
                if ev.ok
                else f"FAILED: {ev.error}"
            )
            self._line(f"{ev.service} {ev.session} turn {ev.turn}: {what}")

    def _finished(self, r: Any) -> None:
        """A request's line: every one of a plain run (`[done/total]`), the failures of a load or soak."""
        p = self.progress
        if p.shaped:
            if not r.ok:
                self._line(f"  {r.service} {r.prompt_id}: FAILED: {r.error}")
            return
        where = f"{r.service} ({r.algorithm}/{r.mode or '-'}) {r.prompt_id} #{r.repeat + 1}"
        tag = "warm-up" if r.warmup else f"[{p.done}/{p.total}]"
        if r.ok:
            acc = f", accept {r.accept_length:.2f}" if r.accept_length is not None else ""
            ttft = f"{r.ttft_s * 1000:.0f} ms" if r.ttft_s is not None else "-"
            rate = f"{r.tok_s:.1f}" if r.tok_s is not None else "-"
            self._line(f"{tag} {where}: {rate} tok/s, TTFT {ttft}{acc}, {r.output_tokens} tokens")
        else:
            self._line(f"{tag} {where}: FAILED: {r.error}")


# --- output --------------------------------------------------------------------------------------------------
def save(run: BenchRun, ns: BenchArgs) -> list[str]:
    """Write --json, --csv and --html; returns the problems (never raises for I/O). The history line is the
    fleet's (fleet/benching.py)."""
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
    html_out = ns.html_out
    if html_out:
        from ddtree_tui.report.output import html_for_run

        try:
            html_for_run(run, html_out, source=ns.json_out)
        except OSError as e:
            problems.append(f"cannot write {html_out}: {e.strerror or e}")
    return problems


def _atomic_write(path: Path, text: str | Iterable[bytes]) -> None:
    """Through the one shared writer: a special file (/dev/null, a FIFO) is written, never replaced."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    atomicio.write_file(path, text)


def _history_path(ns: BenchArgs) -> Path:
    return Path(ns.history) if ns.history else history.DEFAULT_HISTORY


def _stdout(text: str) -> None:
    with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone: the files still get written
        sys.stdout.write(text)
        sys.stdout.flush()


def _emit_plain(ns: BenchArgs, run: BenchRun) -> int:
    """The run's table on stdout and its files; an output that could not be written fails the run (issue 25:
    it used to exit 0)."""
    _stdout(report.table(run))
    _stdout(slices_text(run))
    unsaved = save(run, ns) + save_slices(run, ns)
    for p in unsaved:
        with contextlib.suppress(OSError):
            _err(p)
    if run.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAIL if run.failed or unsaved else EXIT_OK


def _emit_shape(ns: BenchArgs, run: ShapeRun) -> int:
    """A load, soak or agentic run's table on stdout, its --json file and its --html page; a
    soak that drifted fails like a ladder with failed requests, and so does an output not written."""
    _stdout(shape_table(run))
    _stdout(slices_text(run))
    problems: list[str] = save_slices(run, ns)
    if ns.json_out:
        try:
            _atomic_write(Path(ns.json_out), itertools.chain(report.iter_json(run, 1, strict=True), [b"\n"]))
        except OSError as e:
            problems.append(f"cannot write {ns.json_out}: {e.strerror or e}")
    html = ns.html_out
    if html:  # agentic sessions too: their turns, slices and server figures (issue 26)
        from ddtree_tui.report.loadhtml import write_load_html

        try:
            write_load_html(run, html)
        except OSError as e:
            problems.append(f"cannot write {html}: {e.strerror or e}")
    for p in problems:
        with contextlib.suppress(OSError):
            _err(p)
    if isinstance(run, LoadRun | SoakRun) and run.status == "interrupted":
        return EXIT_INTERRUPTED
    bad = bool(run.failed or (isinstance(run, SoakRun) and run.drift))
    return EXIT_FAIL if bad or problems else EXIT_OK


# --- the run, through a fleet --------------------------------------------------------------------------------
def demo_profiles(profiles: Sequence[HostProfile], workdir: str) -> list[HostProfile]:
    """The demo's local hosts for this run: a workdir of their own (their simulated services are launched
    and killed by this run; nothing else should find them) and a free port for a service whose port is taken
    (another demo, a test run: sim/process.demo_ports), said on stderr."""
    from ddtree_tui.sim.process import demo_ports  # --demo only (psutil, urllib)

    moved, notes = demo_ports(profiles)
    for note in notes:
        _err(note)
    return [h.model_copy(update={"workdir": workdir}) if h.is_local else h for h in moved]


async def _prepare(fleet: Fleet, req: BenchRequest, demo: bool) -> str | None:
    """Hosts connected, the demo's simulated services launched and ready, every status known (so the desk
    leaves out what is stopped); None, or why the run cannot go on."""
    if not req.refs:
        return None
    specs = {r: fleet.spec_of(r) for r in req.refs}
    sims = [r for r, (h, s) in specs.items() if demo and h.is_local and s.launcher == "sim"]
    remote = sorted({h.name for h, _ in specs.values() if not h.is_local})
    what = [f"starting simulated {', '.join(sims)}"] if sims else []
    what += [f"connecting to {', '.join(remote)}"] if remote else []
    _err(f"preparing {len(req.refs)} service(s){': ' + '; '.join(what) if what else ''}")
    for name in remote:
        host = next(h for h, _ in specs.values() if h.name == name)
        t = fleet.transport(name)
        if not await t.wait_connected(host.connect_timeout + 2.0):
            return f"cannot reach host {name}: {t.status.error or 'timed out'}"
    await fleet.wait_settled(5.0)

    async def up(ref: str) -> str | None:
        res = await fleet.launch(ref)
        if not res.ok and "already" not in res.message:
            return res.message
        st = await fleet.wait_service(
            ref, {"ready", "crashed", "stopped"}, specs[ref][1].sim.load_time + 30.0
        )
        return None if st.state == "ready" else f"simulated {ref} did not come up: {st.state} ({st.detail})"

    for problem in await asyncio.gather(*(up(r) for r in sims)):
        if problem:
            return problem
    return None


async def _run(
    fleet: Fleet, req: BenchRequest, demo: bool, stop: asyncio.Event
) -> BenchRun | ShapeRun | tuple[int, str]:
    """The run through the fleet, or (exit code, why not)."""
    try:
        problem = await _prepare(fleet, req, demo)
        if problem is not None:
            return EXIT_FAIL, problem
        if stop.is_set():
            return EXIT_INTERRUPTED, "interrupted before the run began"
        if isinstance(req, ShapeRequest):
            return await fleet.run_load_shape(req, stop)
        return await fleet.run_bench(req, stop)
    except (BenchUsageError, LoadError) as e:
        return EXIT_USAGE, str(e)
    except (BenchRefused, RuntimeError, OSError) as e:
        return EXIT_FAIL, str(e)


async def _main(ns: BenchArgs, req: BenchRequest, profiles: list[HostProfile]) -> int:
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
    printer = Progress(shaped=isinstance(req, ShapeRequest))
    outcome: BenchRun | ShapeRun | tuple[int, str]
    try:
        # --energy: the hosts' own telemetry runs, the one the run's GPU numbers come from (issue 26)
        async with Fleet.open(
            profiles, demo=bool(ns.demo), telemetry=req.energy, watch=False, history_path=_history_path(ns)
        ) as fleet:
            q = fleet.subscribe(skip=(BenchLiveWrap,))  # its lines show no request in flight

            async def pump() -> None:
                while True:
                    printer(await q.get())

            pumping = asyncio.create_task(pump())
            try:
                outcome = await _run(fleet, req, bool(ns.demo), stop)
            finally:
                pumping.cancel()
                with contextlib.suppress(BaseException):
                    await pumping
                while not q.empty():  # the fleet's last words before ours
                    printer(q.get_nowait())
                fleet.unsubscribe(q)
    finally:
        for sig in _STOP_SIGNALS:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    if isinstance(outcome, tuple):
        _err(outcome[1])
        return outcome[0]
    run = outcome
    return _emit_plain(ns, run) if isinstance(run, BenchRun) else _emit_shape(ns, run)


@handler("--run-bench", BenchArgs)
def cli_main(ns: BenchArgs) -> int:
    for name, value, low in (
        ("repeats", ns.repeats, 1),
        ("warmup", ns.warmup, 0),
        ("warmup_tokens", 0 if ns.warmup_tokens is None else ns.warmup_tokens, 0),
        ("concurrency", ns.concurrency, 1),
        ("max_new_tokens", ns.max_new_tokens, 1),
        ("workers", 1 if ns.workers == "auto" else ns.workers, 1),
    ):
        if value < low:
            _err(f"--{name.replace('_', '-')} must be at least {low}")
            return EXIT_USAGE
    # issue 25: every count has a bound, and the read limits reach this process and its workers (bench/bounds.py)
    problem = bounds.bench_args_problem(ns)
    if problem:
        _err(problem)
        return EXIT_USAGE
    if (limits := bounds.limits_of(ns)) is not None:
        bounds.use_limits(limits)
    if ns.read_tick_ms is not None:
        bounds.use_read_tick(ns.read_tick_ms)
    if ns.timeout is not None and ns.timeout <= 0:
        _err("--timeout must be positive")
        return EXIT_USAGE
    if ns.temperature < 0:
        _err("--temperature must be >= 0")
        return EXIT_USAGE
    urls: list[str] = []
    try:
        if ns.url:
            if ns.services or ns.demo:
                raise ValueError("--url benches running servers directly: leave out --services and --demo")
            urls = url_list(ns.url)
            chosen = []
        else:
            chosen = select_services(profiles_of(ns), ns.services)
    except (UsageError, ValueError) as e:  # the shared preamble's words for a bad profile
        _err(str(e))
        return EXIT_USAGE
    agentic = ns.sessions is not None
    try:
        if agentic:
            if ns.sessions is not None and (ns.sessions < 1 or (ns.turns or 1) < 1):
                raise PromptError("--sessions and --turns must be at least 1")
            if (ns.think_time or 0.0) < 0:
                raise PromptError("--think-time must be >= 0")
            if ns.prompts != "agentic":
                load_conversations(ns.prompts)
        else:
            if ns.trace and ns.prompts != "seed3":
                raise PromptError("--trace brings its own prompts: leave out --prompts")
            spec = f"trace:{ns.trace}" if ns.trace else ns.prompts
            n = len(load_prompts(spec, seed=ns.bench_seed))
            if too_big := bounds.plan_problem(n, ns.repeats, len(urls) or len(chosen)):
                raise PromptError(too_big)
    except PromptError as e:
        _err(str(e))
        return EXIT_USAGE
    refs = [f"{h.name}/{s.name}" for h, s in chosen]
    names = [url_ref(u) for u in urls] if urls else refs
    if urls and ns.baseline and ns.baseline.rstrip("/") in urls:
        ns = ns.model_copy(update={"baseline": url_ref(ns.baseline.rstrip("/"))})
    if len(set(names)) != len(names):
        _err(f"a service is listed twice: {', '.join(names)}")
        return EXIT_USAGE
    if ns.baseline and ns.baseline not in names:
        _err(f"--baseline {ns.baseline} is not among the services ({', '.join(names)})")
        return EXIT_USAGE
    if not ns.baseline and len(names) > 1:
        # deltas against the first service unless told otherwise
        ns = ns.model_copy(update={"baseline": names[0]})
    if agentic and (ns.load or ns.soak):
        _err("--sessions runs closed-loop conversations: leave out --load and --soak")
        return EXIT_USAGE
    try:
        req = build_request(ns, refs, urls)
    except ValidationError as e:
        for err in e.errors():
            opt = "--" + "-".join(str(x) for x in err.get("loc", ())).replace("_", "-")
            _err(
                f"{opt}: {str(err.get('msg', 'invalid value')).removeprefix('Value error, ')} (got {err.get('input')!r})"
            )
        return EXIT_USAGE
    except ValueError as e:  # LoadError too
        _err(str(e))
        return EXIT_USAGE
    if isinstance(req, ShapeRequest) and not req.sessions and ns.csv_out:
        _err("--csv is for plain runs; a --load or --soak run writes --json (schema 2) and --html")
        return EXIT_USAGE
    hosts = {h.name for h, _ in chosen}
    profiles = [h for h in profiles_of(ns) if h.name in hosts] if chosen else []
    # the client's worker processes are forked from a zygote forked here, before the loop and any thread
    # (fleet/benchprocs.py); ended and waited for after the loop, so their CPU is counted in ours
    if not ns.demo:
        with worker_zygote(req), asyncio.Runner(loop_factory=new_loop) as runner:  # uvloop (bench/evloop.py)
            return runner.run(_main(ns, req, profiles))
    paths.PROJECT_DIR.mkdir(exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="run-bench-demo-", dir=paths.PROJECT_DIR)
    try:
        with worker_zygote(req), asyncio.Runner(loop_factory=new_loop) as runner:
            return runner.run(_main(ns, req, demo_profiles(profiles, str(Path(workdir).resolve()))))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

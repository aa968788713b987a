"""UI responsiveness under load: key press -> repaint latency (p50/p95) while N hosts are sampled (replayed
H200 telemetry, 2 or 8 GPUs a host) and a benchmark streams from two simulated services; time to first paint;
each pane's paint time; RSS at the end. The terminal is 160x48: every pane on one screen.

    .venv/bin/python benchmarks/ui.py                               # 16 hosts, 10 minutes (the RSS measurement)
    .venv/bin/python benchmarks/ui.py --minutes 0.5                 # a quick look
    .venv/bin/python benchmarks/ui.py --hosts 64 --gpus 8 --all-services --minutes 1   # 512 GPU rows, 128 services
    .venv/bin/python benchmarks/ui.py --compare main --minutes 0.5  # main's code, then this tree's, side by side
    .venv/bin/python benchmarks/ui.py --compare main --parallel --minutes 1   # both at once (a busy machine)

The rows `first frame from process start` ... are the real `ddtree-tui` started in a terminal, imports included
(benchmarks/ui_startup.py, before the in-process run); `time to first frame` below is the app alone.

Headless (Textual's test driver): a key event is posted as the terminal driver would post it, and the
latency ends when the next frame reaches the display (App._display): the work a real terminal would see,
without Pilot's own settling sleeps. `--compare REV` runs REV's package (git archive) and then this tree's,
one after the other with the same arguments, and prints both with the ratio (this tree / REV): on a shared
machine the two runs see roughly the same load, which absolute numbers do not; `--parallel` runs the two at
the same time, so they see the same load even when it changes by the minute. Paint and repaint times are CPU
time of the app's thread (the work done, whatever the load); key -> repaint and first paint are wall time.
Targets from issue 28: 16 hosts p95 < 30 ms, 64 hosts x 8 GPUs p95 < 50 ms, first paint < 1 s, RSS < 250 MB.

The `gen N collection` rows are the garbage collections during the load, by generation: CPU time of the
thread that ran each (the app's thread waits for it through the GIL either way). `--slow-keys MS` prints, for
every key slower than MS, what the app's thread did meanwhile: a repaint tick, a layout pass, collections.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import psutil

# --code DIR: import the package from DIR (REV's tree, for --compare), else from this checkout
sys.path.insert(
    0, sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv[:-1] else str(Path(__file__).parents[1])
)

import ddtree_tui.ui  # noqa: F401  before Textual: it sets Textual's frame rate as the app has it

# isort: split
from textual import events

from ddtree_tui.bench.models import BenchRequest
from ddtree_tui.config import parse_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.sim.process import free_port
from ddtree_tui.ui import controller as controller_mod
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.widgets.bench import BenchPane

REPO = Path(__file__).resolve().parent.parent
HOST_TOML = """
name = "{name}"
address = "local"
workdir = "{workdir}"
[telemetry]
source = "replay"
replay = "{replay}"
interval_ms = 1000
"""


def widen_recording(dst: Path, gpus: int) -> str:
    """The built-in H200 recording with each frame's GPUs repeated up to `gpus` a host (indices 0..gpus-1)."""
    from ddtree_tui.telemetry.replay import _builtin_text

    out: list[str] = []
    for line in _builtin_text("h200-under-load").splitlines():
        frame = json.loads(line) if line.strip() else None
        if frame and isinstance(frame.get("gpus"), list) and frame["gpus"]:
            base = frame["gpus"]
            frame["gpus"] = [
                {**base[i % len(base)], "index": i, "uuid": f"GPU-bench-{i}", "pci_bus_id": f"0:{i}"}
                for i in range(gpus)
            ]
        if frame is not None:
            out.append(json.dumps(frame))
    dst.write_text("\n".join(out) + "\n", encoding="utf-8")
    return str(dst)


def sim_service_toml(
    name: str, algorithm: str, port: int, decode_rate: float, seed: int, mode: str = ""
) -> str:
    """One simulated service on GPU 0 (the demo's numbers: accept length 3.4, half a second to load)."""
    mode_line = f'mode = "{mode}"\n' if mode else ""
    return (
        f'\n[[service]]\nname = "{name}"\nalgorithm = "{algorithm}"\n{mode_line}launcher = "sim"\n'
        f"port = {port}\ngpus = [0]\n[service.sim]\naccept_length = 3.4\ndecode_rate = {decode_rate}\n"
        f"load_time = 0.5\nseed = {seed}\n"
    )


def services_toml() -> str:
    """The two services every benchmark host runs: DFlash and DDTree shadow, on free ports."""
    return sim_service_toml("dflash", "dflash", free_port(), 41.0, 1) + sim_service_toml(
        "ddtree-shadow", "ddtree", free_port(), 40.5, 2, mode="shadow-linear"
    )


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


class GcPauses:
    """Every garbage collection while on: its generation, wall start and length, and the thread it ran in (the
    collector runs in whichever thread allocated; the app's thread waits for it either way, through the GIL)."""

    def __init__(self) -> None:
        self.on = False
        self.done: list[tuple[int, float, float, float]] = []  # (generation, start, wall ms, CPU ms)
        self._start = self._start_cpu = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._start, self._start_cpu = time.perf_counter(), time.thread_time()
        else:
            wall, cpu = time.perf_counter() - self._start, time.thread_time() - self._start_cpu
            self.done.append((info["generation"], self._start, wall * 1000, cpu * 1000))

    def rows(self, seconds: float) -> list[tuple[str, str, str]]:
        out = []
        for gen in (0, 1, 2):
            ms = [c for g, _, _, c in self.done if g == gen]
            what = (
                f"{statistics.median(ms):.1f}/{pct(ms, 95):.1f}/{max(ms):.1f} ({len(ms)})" if ms else "- (0)"
            )
            out.append((f"gen {gen} collection CPU p50/p95/max (n)", what, f"in {seconds:.0f} s"))
        return out

    def within(self, start: float, end: float) -> list[tuple[int, float]]:
        return [(g, d) for g, s, d, _ in self.done if s < end and s + d / 1000 > start]


RSS_AT_MIN = (0.5, 1, 2, 4, 6, 10)  # minutes after the load starts: RSS checkpoints reported in the table


def _trace_diff(old: tracemalloc.Snapshot, new: tracemalloc.Snapshot, label: str, top: int = 15) -> None:
    """Print the allocations that grew most between two snapshots, by traceback (to stderr)."""
    stats = new.compare_to(old, "traceback")
    total = sum(st.size_diff for st in stats) / 1024 / 1024
    print(f"--- tracemalloc growth {label}: {total:+.1f} MiB traced; top {top} ---", file=sys.stderr)
    for st in stats[:top]:
        print(f"{st.size_diff / 1024:+9.1f} KiB {st.count_diff:+7d} blocks", file=sys.stderr)
        for line in st.traceback.format()[-12:]:
            print(f"    {line}", file=sys.stderr)


def _print_profile(prof: cProfile.Profile, top: int, keys: int) -> None:
    """The app thread's work between each key and its frame, summed over `keys` keys (to stderr)."""
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    print(f"--- cProfile of the app's thread from each key to its frame ({keys} keys) ---", file=sys.stderr)
    for order in ("cumulative", "tottime"):
        stats.sort_stats(order).print_stats(top)
    print(out.getvalue(), file=sys.stderr)


async def run(
    minutes: float,
    hosts: int,
    trace: int = 0,
    gpus: int = 2,
    all_services: bool = False,
    profile: int = 0,
    slow_keys: float = 0.0,
) -> list[tuple[str, str, str]]:
    tmp = Path(tempfile.mkdtemp(prefix="ddtree-ui-bench-"))
    home = os.getcwd()
    os.chdir(tmp)
    replay = "h200-under-load" if gpus == 2 else widen_recording(tmp / "replay.jsonl", gpus)
    profiles = []
    for i in range(hosts):
        text = HOST_TOML.format(name=f"h{i:02d}", workdir=tmp / f"w{i}", replay=replay)
        if i == 0 or all_services:  # only h00's are launched: the others are rows in the services table
            text += services_toml()
        profiles.append(parse_profile(text, f"h{i}.toml"))
    fleet = Fleet(profiles, todos_path=tmp / "todos.json", history_path=tmp / "history.jsonl", demo=True)
    t0 = time.perf_counter()
    app = DDTreeApp(fleet, demo=True)
    # repaints and pane paints are timed in CPU time of the app's thread (time.thread_time): the work they
    # are, not how long the busy machine took to give it a core; a timer repaint's is the sum of its panes'
    flush_ms: list[float] = []
    in_tick: list[float] = []  # the pane paints of the timer repaint in progress
    orig_flush = app.flush

    def timed_flush(force: bool = False) -> None:
        s0 = time.thread_time()
        orig_flush(force)
        flush_ms.append((time.thread_time() - s0) * 1000)

    app.flush = timed_flush  # type: ignore[method-assign]
    orig_tick = getattr(app, "_repaint_tick", None)  # the timer's repaint, a pane at a time (newer trees)
    if orig_tick is not None:

        async def timed_tick() -> None:
            in_tick.append(0.0)
            t_start = time.perf_counter()
            try:
                await orig_tick()
            finally:
                flush_ms.append(in_tick.pop())
                spans["tick"].append((t_start, time.perf_counter()))

        app._repaint_tick = timed_tick  # type: ignore[method-assign]
    # --slow-keys: what ran on the app's thread while a slow key waited (wall spans: start, end)
    spans: dict[str, list[tuple[float, float]]] = {"tick": [], "layout": [], "frame": [], "handled": []}
    gcp = GcPauses()
    gc.callbacks.append(gcp)
    pane_ms: dict[int, list[float]] = {}
    orig_paint = app._paint

    def timed_paint(n: int, *built: object) -> None:  # built: a view made off the loop (newer trees)
        s0 = time.thread_time()
        orig_paint(n, *built)
        ms = (time.thread_time() - s0) * 1000
        pane_ms.setdefault(n, []).append(ms)
        if in_tick:
            in_tick[-1] += ms

    app._paint = timed_paint  # type: ignore[method-assign]
    # the GPU view's build, timed in the CPU time of whichever thread builds it (newer trees build a long one
    # in a thread, where the pane paint rows above no longer see it)
    build_ms: list[float] = []
    orig_build = controller_mod.gpus_view

    def timed_build(*a: Any, **kw: Any) -> Any:
        s0 = time.thread_time()
        try:
            return orig_build(*a, **kw)
        finally:
            build_ms.append((time.thread_time() - s0) * 1000)

    controller_mod.gpus_view = timed_build  # type: ignore[assignment]
    first_paint = first_frame = 0.0
    latencies: list[float] = []
    latencies_cpu: list[float] = []
    bench_runs = 0
    # the first frame: the first time a frame reaches the display (as for keys, below)
    frames: list[float] = []
    first_display = app._display

    def first_spy(screen: object, renderable: object) -> None:
        frames.append(time.perf_counter())
        first_display(screen, renderable)  # type: ignore[arg-type]

    app._display = first_spy  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        while app.paint_count < 1 or not frames:
            await asyncio.sleep(0.001)
        first_frame = frames[0] - t0
        await pilot.pause()
        first_paint = time.perf_counter() - t0  # the older measure: the first paint and whatever came next
        await asyncio.sleep(2.0)
        for ref in ("h00/dflash", "h00/ddtree-shadow"):
            await fleet.launch(ref)
        refs = ["h00/dflash", "h00/ddtree-shadow"]
        bench = app.query_one(BenchPane)
        load_start, cpu0 = time.monotonic(), time.process_time()
        deadline = load_start + minutes * 60
        rss_marks = [m for m in RSS_AT_MIN if m < minutes]
        rss_at: list[tuple[float, float]] = []
        snaps: list[tuple[float, tracemalloc.Snapshot]] = []
        if trace:
            tracemalloc.start(trace)
        paints: list[float] = []
        paints_cpu: list[float] = []  # the app thread's CPU time at each frame
        display = app._display
        prof = cProfile.Profile() if profile else None  # --profile: on from a key to its frame
        profiling: list[bool] = []

        def spy(screen: object, renderable: object) -> None:
            paints.append(time.perf_counter())
            paints_cpu.append(time.thread_time())
            display(screen, renderable)  # type: ignore[arg-type]
            if prof is not None and profiling:
                prof.disable()
                profiling.clear()

        app._display = spy  # type: ignore[method-assign]
        if slow_keys:
            _spy_frames(app, spans)
        gcp.on = True
        keys_at: list[tuple[float, float]] = []  # each key: (posted, its frame)
        i = 0
        await pilot.press("3")
        while time.monotonic() < deadline:
            if rss_marks and time.monotonic() - load_start >= rss_marks[0] * 60:
                mark = rss_marks.pop(0)
                rss_at.append((mark, psutil.Process().memory_info().rss / 1024 / 1024))
                if trace:
                    snaps.append((mark, tracemalloc.take_snapshot()))
            if not bench.live.running and not any(w.name == "bench" and w.is_running for w in app.workers):
                app.start_bench(BenchRequest(refs=refs, prompt_set="seed3", repeats=2, max_new_tokens=128))
                bench_runs += 1
                await pilot.press("3")  # back to the fleet tab: the busiest one
                await pilot.pause(0.2)
            # the key goes in as the terminal driver would post it; latency ends at the next frame on screen
            table = app.query_one("#services-table")
            if app.focused is not table:  # a key that changes nothing never repaints: only time real moves
                table.focus()
                await pilot.pause(0.2)
                continue
            key = "down" if table.cursor_row == 0 else "up"  # type: ignore[attr-defined]
            i += 1
            n = len(paints)
            start, start_cpu = time.perf_counter(), time.thread_time()
            if prof is not None:
                profiling.append(True)
                prof.enable()
            app.post_message(events.Key(key, None))
            while len(paints) == n and time.perf_counter() - start < 5:
                await asyncio.sleep(0.0005)
            if prof is not None and profiling:  # no frame within the bound
                prof.disable()
                profiling.clear()
            latencies.append(((paints[n] if len(paints) > n else time.perf_counter()) - start) * 1000)
            keys_at.append((start, start + latencies[-1] / 1000))
            # the work the app's thread did between the key and its frame: what the wait would be on an idle
            # core (the key's handling, any repaint that came first, the frame), free of the machine's load
            latencies_cpu.append(
                ((paints_cpu[n] if len(paints) > n else time.thread_time()) - start_cpu) * 1000
            )
            await asyncio.sleep(0.1)
        rss = psutil.Process().memory_info().rss / 1024 / 1024
        cpu_s, load_s = time.process_time() - cpu0, time.monotonic() - load_start
        gcp.on = False
        gc.callbacks.remove(gcp)
        if slow_keys:
            _explain(keys_at, slow_keys, spans, gcp)
        if trace and snaps:
            end = tracemalloc.take_snapshot()
            mark, first = next(((m, s) for m, s in snaps if m >= 1), snaps[0])
            _trace_diff(first, end, f"from minute {mark:g} to the end")
            tracemalloc.stop()
        if prof is not None:
            _print_profile(prof, profile, len(latencies))
        await pilot.pause()  # the last key handled before the app goes (a key after it: no screen to take it)
        await app.action_quit()
    await fleet.stop()
    os.chdir(home)
    shutil.rmtree(tmp, ignore_errors=True)  # workdirs, logs, the history file: nothing left behind in /tmp
    return [
        ("hosts sampled", str(hosts), ""),
        ("GPU rows / service rows", f"{hosts * gpus} / {2 * (hosts if all_services else 1)}", ""),
        ("bench runs streamed", str(bench_runs), ""),
        ("key presses", str(len(latencies)), ""),
        ("key -> repaint p50", f"{statistics.median(latencies):.1f} ms", ""),
        ("key -> repaint p95", f"{pct(latencies, 95):.1f} ms", "< 30 ms (16 hosts), < 50 ms (64 x 8)"),
        ("key -> repaint max", f"{max(latencies):.1f} ms", ""),
        ("key -> repaint CPU p50", f"{statistics.median(latencies_cpu):.1f} ms", ""),
        ("key -> repaint CPU p95", f"{pct(latencies_cpu, 95):.1f} ms", "(the wall p95 on an idle core)"),
        ("repaint CPU p50", f"{statistics.median(flush_ms):.1f} ms", ""),
        ("repaint CPU p95", f"{pct(flush_ms, 95):.1f} ms", ""),
        ("time to first frame", f"{first_frame * 1000:.0f} ms", "< 1000 ms (on the display)"),
        ("first paint, loop settled", f"{first_paint * 1000:.0f} ms", "(the earlier row: + fleet start)"),
        *[
            (f"pane {n} paint CPU p50/p95 (n)", f"{statistics.median(v):.1f}/{pct(v, 95):.1f} ({len(v)})", "")
            for n, v in sorted(pane_ms.items())
        ],
        (
            "GPU view build CPU p50/p95 (n)",
            f"{statistics.median(build_ms):.1f}/{pct(build_ms, 95):.1f} ({len(build_ms)})"
            if build_ms
            else "-",
            "any thread",
        ),
        ("process CPU under load", f"{cpu_s / load_s * 100:.0f} % of a core", "all threads"),
        *gcp.rows(load_s),
        *[(f"RSS at {m:g} min", f"{r:.0f} MB", "") for m, r in rss_at],
        (f"RSS after {minutes:g} min", f"{rss:.0f} MB", "< 250 MB"),
    ]


def _spy_frames(app: DDTreeApp, spans: dict[str, list[tuple[float, float]]]) -> None:
    """Record the layout passes and frame updates of the app's screens, and when a cursor key was handled."""
    from textual.screen import Screen
    from textual.widgets import DataTable

    def wrap(cls: Any, name: str, kind: str) -> None:
        orig = getattr(cls, name)

        def timed(self: Any, *a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return orig(self, *a, **kw)
            finally:
                spans[kind].append((t, time.perf_counter()))

        setattr(cls, name, timed)

    wrap(Screen, "_refresh_layout", "layout")
    wrap(Screen, "_on_timer_update", "frame")
    wrap(DataTable, "action_cursor_down", "handled")
    wrap(DataTable, "action_cursor_up", "handled")


def _explain(
    keys: list[tuple[float, float]],
    over_ms: float,
    spans: dict[str, list[tuple[float, float]]],
    gcp: GcPauses,
) -> None:
    """Each key slower than `over_ms`: what the app's thread did between its post and its frame (to stderr)."""

    def inside(kind: str, a: float, b: float) -> float:
        return sum(max(0.0, min(e, b) - max(s, a)) for s, e in spans[kind]) * 1000

    slow = [(a, b) for a, b in keys if (b - a) * 1000 > over_ms]
    print(
        f"--- {len(slow)} of {len(keys)} keys over {over_ms:g} ms: where they waited (ms) ---",
        file=sys.stderr,
    )
    print("total  to-handled  tick  layout  frame  gc(gen:ms)", file=sys.stderr)
    totals = {"tick": 0, "layout": 0, "gc2": 0, "gc": 0}
    for a, b in slow:
        handled = next((s for s, _ in spans["handled"] if s >= a), b)
        gcs = gcp.within(a, b)
        tick, layout = inside("tick", a, b), inside("layout", a, b)
        totals["tick"] += tick > 1
        totals["layout"] += layout > 1
        totals["gc2"] += any(g == 2 for g, _ in gcs)
        totals["gc"] += bool(gcs)
        print(
            f"{(b - a) * 1000:5.1f}  {(min(handled, b) - a) * 1000:10.1f}  {tick:4.1f}  {layout:6.1f}"
            f"  {inside('frame', a, b):5.1f}  {' '.join(f'{g}:{d:.1f}' for g, d in gcs)}",
            file=sys.stderr,
        )
    print(f"keys with a repaint tick / layout / any gc / a full gc: {totals}", file=sys.stderr)


def print_table(rows: list[tuple[str, str, str]]) -> None:
    w = max(len(r[0]) for r in rows)
    print(f"{'metric':<{w}}  {'value':>12}  target")
    for name, value, target in rows:
        print(f"{name:<{w}}  {value:>12}  {target}")


def _number(value: str) -> float | None:
    head = value.split()[0].split("/")[0] if value.strip() else ""
    try:
        return float(head)
    except ValueError:
        return None


def compare(rev: str, argv: list[str], parallel: bool = False) -> None:
    """REV's package, then this tree's, each in a child process with the same arguments; one table."""
    results: list[list[list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="ddtree-ui-compare-") as tmp:
        base = Path(rev)
        if not (base / "ddtree_tui").is_dir():  # a revision (else a tree already unpacked: no git there)
            base = Path(tmp) / "base"
            base.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", rev, "ddtree_tui", "themes"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        outs = [Path(tmp) / "base.json", Path(tmp) / "tree.json"]
        cmds = [
            [sys.executable, str(Path(__file__).resolve()), *argv, "--code", str(code), "--json", str(out)]
            for code, out in zip((base, REPO), outs, strict=True)
        ]
        if (
            parallel
        ):  # both at once: on a shared machine they see the same load, which one-after-the-other do not
            procs = [subprocess.Popen(cmd) for cmd in cmds]
            codes = [p.wait() for p in procs]
            if any(codes):
                raise SystemExit(f"a benchmark child failed: exit statuses {codes}")
        else:
            for cmd in cmds:
                subprocess.run(cmd, check=True)
        results = [json.loads(out.read_text(encoding="utf-8")) for out in outs]
    before = {r[0]: r[1] for r in results[0]}
    w = max(len(r[0]) for r in results[1])
    print(f"{'metric':<{w}}  {rev:>14}  {'this tree':>14}  {'ratio':>6}  target")
    for name, value, target in results[1]:
        old = before.get(name, "-")
        a, b = _number(old), _number(value)
        ratio = f"{b / a:.2f}" if a and b is not None else ""
        print(f"{name:<{w}}  {old:>14}  {value:>14}  {ratio:>6}  {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="how long to keep the load on (default 10)")
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--gpus", type=int, default=2, help="GPUs a host (the recording has 2; more repeat them)")
    ap.add_argument("--all-services", action="store_true", help="two services on every host (h00's run)")
    ap.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="trace allocations (FRAMES deep) and print the top growth from minute 1 to the end (slow)",
    )
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="TOP",
        help="cProfile the app's thread from each key to its frame; print the TOP functions (to stderr)",
    )
    ap.add_argument(
        "--slow-keys",
        type=float,
        default=0.0,
        metavar="MS",
        help="print, for each key slower than MS, what the app's thread did meanwhile (to stderr)",
    )
    ap.add_argument(
        "--compare",
        metavar="REV",
        help="run REV's package first, then this tree's; print both (REV may be a directory holding an "
        "unpacked tree: ddtree_tui/ and themes/, e.g. on a machine without the git history)",
    )
    ap.add_argument(
        "--parallel",
        action="store_true",
        help="with --compare: run REV's and this tree's at the same time (a shared, busy machine)",
    )
    ap.add_argument(
        "--startup-runs",
        type=int,
        default=3,
        metavar="N",
        help="starts of the real `ddtree-tui` in a terminal, for the first-frame rows (benchmarks/ui_startup.py;"
        " 0: none)",
    )
    ap.add_argument("--code", help=argparse.SUPPRESS)  # read before the imports (see the top)
    ap.add_argument("--json", help=argparse.SUPPRESS)  # where a --compare child writes its rows
    ns = ap.parse_args()
    if ns.compare:
        argv = [a for a in sys.argv[1:] if a not in ("--compare", ns.compare, "--parallel")]
        compare(ns.compare, argv, ns.parallel)
        return
    rows: list[tuple[str, str, str]] = []
    if ns.startup_runs > 0:  # first, in a quiet process: the real command's first frame, imports included
        from ui_startup import startup_rows  # benchmarks/ui_startup.py, beside this script

        code = Path(ns.code) if ns.code else REPO
        rows += startup_rows(
            code,
            ns.hosts,
            ns.gpus,
            ns.all_services,
            HOST_TOML,
            services_toml,
            widen_recording,
            ns.startup_runs,
        )
    rows = (
        asyncio.run(
            run(ns.minutes, ns.hosts, ns.tracemalloc, ns.gpus, ns.all_services, ns.profile, ns.slow_keys)
        )
        + rows
    )
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows), encoding="utf-8")
    print_table(rows)


if __name__ == "__main__":
    main()

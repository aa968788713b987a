"""Soak on the simulator in a child process with injected drift, 3 s windows: a slowdown started as window
3 begins and a GPU memory creep started as window 5 begins; the slowdown is caught in window 3, the creep in
window 5; the windows were appended to the log as the run went; the drift rules on numbers alone.

Each drift is started by the test (the simulator's POST /sim/drift) when the window before it is announced,
after that window's probe and before the next window's first request: the windows are the client's clock and
the drift the simulator's, so drift set at a simulated time landed a window early or late on a busy machine
(the simulator's clock starts at its first request, and a busy window's in-flight requests and probes ran
0.8 s past its end: CI saw the decay in window 4, a loaded run the creep in window 4).

The seconds above are the simulator's: it runs TIME_SCALE times faster (sim/config.py, time_scale) while a
soak's windows are real seconds on the client's clock, so a window of 3 simulated seconds is 1 real one. The
run is the same run fast-forwarded (the same requests and modelled drift in each window), in a third of
the wall time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ddtree_tui.bench import history
from ddtree_tui.bench.levels import LevelService, Pctl
from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.models import BenchRequest, BenchTarget
from ddtree_tui.bench.results import GpuWindow, ServiceProbe, SoakRun, SoakWindow
from ddtree_tui.bench.runner import RunHooks
from ddtree_tui.bench.soak import (
    SoakSettings,
    detect_drift,
    run_soak,
    sim_gpu_probe,
)
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess
from tests import httpc
from tests.util import free_port

TIME_SCALE = 3.0  # simulated seconds per real second
WINDOW = 3.0 / TIME_SCALE  # 3 simulated seconds, in the client's real ones
NEVER = 1e9  # a drift's start: never by itself, only when the test starts it


@pytest.mark.slow
def test_soak_catches_injected_slowdown_and_memory_creep_in_their_windows(tmp_path: Path) -> None:
    cfg = SimConfig(
        algorithm="dflash",
        port=free_port(),
        accept_length=3.0,
        decode_rate=60.0,
        slowdown_after=NEVER,  # until the test starts it (POST /sim/drift)
        slowdown_factor=3.0,
        mem_creep_after=NEVER,
        mem_creep_mib_s=100.0,
        time_scale=TIME_SCALE,
    )
    log = tmp_path / "soak.windows.jsonl"
    seen: list[int] = []
    with SimProcess(cfg) as sim:
        t = BenchTarget(ref="h/spec", base_url=sim.base_url, algorithm="dflash", mode="linear")
        req = BenchRequest(prompts="seed3", max_new_tokens=16, ignore_eos=True)

        def on_event(ev: object) -> None:
            if isinstance(ev, SoakWindow):
                seen.append(len(log.read_text().splitlines()))  # already on disk when announced
                start = {2: "slowdown", 4: "mem_creep"}.get(ev.index)
                if start:  # between two windows: none of this window's requests or probes is running
                    r = httpc.post(sim.base_url + "/sim/drift", json={"start": [start]}, timeout=30)
                    assert r.status == 200 and r.json()[f"{start}_after"] < NEVER, r.text

        run = asyncio.run(
            run_soak(
                req,
                [t],
                parse_load("concurrency:2"),
                SoakSettings(
                    duration_s=8 * WINDOW,
                    window_s=WINDOW,
                    log_path=log,
                    gpu_probe=sim_gpu_probe,
                    history_path=tmp_path / "history.jsonl",
                ),
                RunHooks(on_event=on_event),
            )
        )
    assert run.status == "complete" and run.failed == 0 and run.concurrency == 2
    assert [w.index for w in run.windows] == list(range(8))
    kinds = {d.kind: d for d in run.drift}
    assert kinds["tok_s_decay"].window == 3, run.drift
    assert kinds["gpu_memory_creep"].window == 5, run.drift
    assert "error_onset" not in kinds and "restart" not in kinds and "unhealthy" not in kinds
    thr = [w.metrics.output_throughput for w in run.windows]
    # the modelled 3x slower steps, with room to spare, against the unslowed pace: the best of the windows
    # before the drift (one of them starved on a busy machine, window 2 at 222 tok/s beside 532 and 504, is
    # not the pace the slowdown divides)
    assert thr[4] < 0.6 * max(thr[:3]), thr
    mem = [w.probe.gpus[0].memory_used_mib for w in run.windows]
    assert mem[:5] == [40000.0] * 5 and mem[7] > mem[6] > mem[5] > 40000.0
    assert all(w.probe.gpu_source == "sim" and w.probe.healthy for w in run.windows)
    # appended as it went: the start line then one line a window, each on disk before the next began
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[0]["kind"] == "soak_started" and [x["index"] for x in lines[1:]] == list(range(8))
    assert seen == list(range(2, 10))
    # the history got the same lines as they came: a crash before the run's own line loses no window (the
    # soak is rebuilt, interrupted, with its drift); once the run is appended, that is what is read
    hist = tmp_path / "history.jsonl"
    assert [json.loads(x)["kind"] for x in hist.read_text().splitlines()] == ["soak_started"] + [
        "soak_window"
    ] * 8
    (rebuilt,) = history.load_shapes(hist)
    assert isinstance(rebuilt, SoakRun) and rebuilt.id == run.id and rebuilt.status == "interrupted"
    assert [w.index for w in rebuilt.windows] == list(range(8)) and rebuilt.drift == run.drift
    assert rebuilt.concurrency == 2 and [t.ref for t in rebuilt.targets] == ["h/spec"]
    history.append_shape(run, hist)
    (back,) = history.load_shapes(hist)
    assert back.status == "complete" and back == run
    assert history.load(hist) == []  # readers of plain runs skip every schema 2 line
    # the HTML report: the time series with the drift windows marked, and the windows table
    from ddtree_tui.report.loadhtml import render_soak

    page = render_soak(run)
    assert 'id="chart-soak"' in page and "<svg" in page and "<script" not in page
    assert "tok_s_decay from window 3" in page and "gpu_memory_creep from window 5" in page
    assert "tok_s_decay (window 3)" in page and "gpu_memory_creep (window 5)" in page  # the chart's marks


def _w(i: int, thr: float, ttft: float = 20.0, mem: float = 1000.0, failed: int = 0, healthy: bool = True):
    m = LevelService(
        service="s", algorithm="dflash", mode=None, n=10, failed=failed, output_throughput=thr,
        ttft_ms=Pctl(p50=ttft), error_rate=failed / 10,
    )  # fmt: skip
    p = ServiceProbe(healthy=healthy, gpus=[GpuWindow(index=0, memory_used_mib=mem)])
    return SoakWindow(
        run_id="r", index=i, start_s=i * 10.0, end_s=(i + 1) * 10.0, service="s", metrics=m, probe=p
    )


def test_drift_rules_on_numbers() -> None:
    steady = [_w(i, 100.0) for i in range(8)]
    assert detect_drift(steady) == []
    # one bad window is noise, two running are a decay (from the first of them)
    blip = [_w(i, 60.0 if i == 4 else 100.0) for i in range(8)]
    assert detect_drift(blip) == []
    decay = [_w(i, 100.0 if i < 5 else 70.0) for i in range(8)]
    assert [(d.kind, d.window) for d in detect_drift(decay)] == [("tok_s_decay", 5)]
    ttft = [_w(i, 100.0, ttft=20.0 if i < 4 else 80.0) for i in range(8)]
    assert [(d.kind, d.window) for d in detect_drift(ttft)] == [("ttft_growth", 4)]
    creep = [_w(i, 100.0, mem=1000.0 + max(0, i - 3) * 200.0) for i in range(8)]
    assert [(d.kind, d.window) for d in detect_drift(creep)] == [("gpu_memory_creep", 4)]
    errors = [_w(i, 100.0, failed=2 if i == 6 else 0) for i in range(8)]
    assert [(d.kind, d.window) for d in detect_drift(errors)] == [("error_onset", 6)]
    down = [_w(i, 100.0, healthy=i != 5) for i in range(8)]
    assert [(d.kind, d.window) for d in detect_drift(down)] == [("unhealthy", 5)]


@pytest.mark.slow
def test_soak_interleaves_services_and_flags_drift_on_the_one_that_drifts() -> None:
    """Two services take turns inside every window (the order rotating), and a slowdown injected into one
    is flagged for that one only."""
    # 2 simulated seconds a window as before, each 1 real one (the simulators run twice as fast)
    base = dict(algorithm="dflash", accept_length=3.0, decode_rate=60.0, time_scale=2.0)
    slow = SimConfig(port=free_port(), slowdown_after=7.0, slowdown_factor=3.0, **base)  # type: ignore[arg-type]
    steady = SimConfig(port=free_port(), **base)  # type: ignore[arg-type]
    with SimProcess(slow, wait_ready=False) as a, SimProcess(steady, wait_ready=False) as b:
        a.wait_healthy(20.0)  # both started at once, then waited for
        b.wait_healthy(20.0)
        targets = [
            BenchTarget(ref="h/slow", base_url=a.base_url, algorithm="dflash", mode="linear"),
            BenchTarget(ref="h/steady", base_url=b.base_url, algorithm="dflash", mode="linear"),
        ]
        req = BenchRequest(prompts="seed3", max_new_tokens=16, ignore_eos=True)
        run = asyncio.run(
            run_soak(req, targets, parse_load("sync"), SoakSettings(duration_s=6 * 1.0, window_s=1.0))
        )
    assert run.status == "complete" and run.failed == 0
    by_window: dict[int, list[str]] = {}
    for w in run.windows:
        by_window.setdefault(w.index, []).append(w.service)
        assert w.metrics.n > 0, w  # every service got a turn in every window
    assert sorted(by_window) == list(range(6))
    assert by_window[0] == ["h/slow", "h/steady"] and by_window[1] == ["h/steady", "h/slow"]
    assert all(sorted(v) == ["h/slow", "h/steady"] for v in by_window.values())
    decays = [(d.service, d.window) for d in run.drift if d.kind == "tok_s_decay"]
    assert decays and all(svc == "h/slow" for svc, _ in decays), run.drift
    assert decays[0][1] in (3, 4), run.drift

"""Alerts: the engine's rules on the fleet's own event shapes, and end to end: a DCGM XID read through a real
Prometheus becomes an alert in the collector's /metrics and /events and a notice in the TUI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ddtree_tui.alerts import AlertEngine
from ddtree_tui.collector.server import Collector, serve
from ddtree_tui.config import AlertOptions, load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.lib import http
from ddtree_tui.model.events import AlertChanged, GpuSampleEvent, Notice, ServicePlanned, ServiceStateChanged
from ddtree_tui.model.snapshot import GpuSample, ServiceStatus, TelemetryStatus
from ddtree_tui.sim.config import TIME_SCALE_ENV
from tests import httpc
from tests.collector.dcgm import FakeDcgm, FakeGpu, start_exporter
from tests.collector.prom import Prometheus
from tests.util import free_port, until


def _engine(opt: AlertOptions | None = None) -> tuple[AlertEngine, list[Any]]:
    out: list[Any] = []
    return AlertEngine(lambda host: opt or AlertOptions(), out.append), out


def _svc(
    state: str, accept: float | None = None, pid: int | None = None, seen: float | None = None
) -> ServiceStateChanged:
    st = ServiceStatus(name="dflash", host="h", algorithm="dflash", port=1, state=state, accept_length=accept,  # type: ignore[arg-type]
                       pid=pid, observed_at={"accept_length": seen} if seen is not None else {})  # fmt: skip
    return ServiceStateChanged(host="h", status=st)


def _planned(verb: str, by: str = "user") -> ServicePlanned:
    return ServicePlanned(host="h", service="dflash", verb=verb, by=by)  # type: ignore[arg-type]


def _gpu(**kw: Any) -> GpuSampleEvent:
    return GpuSampleEvent(
        host="h", host_sample=None, gpus=[GpuSample(index=3, **kw)], telemetry=TelemetryStatus()
    )


def test_accept_length_collapse_against_its_running_median() -> None:
    eng, out = _engine(AlertOptions(accept_min_samples=5))
    for v in (3.4, 3.5, 3.3, 3.4, 3.6, 3.4):
        eng.handle(_svc("ready", v))
    assert not eng.alerts()
    eng.handle(_svc("ready", 1.5))  # below half of ~3.4
    [a] = eng.alerts()
    assert (a.kind, a.subject, a.active) == ("accept_collapse", "dflash", True)
    assert any(isinstance(e, Notice) and "ALERT h/dflash" in e.text for e in out)
    eng.handle(_svc("ready", 3.3))
    assert not eng.alerts()
    cleared = [e for e in out if isinstance(e, AlertChanged) and not e.alert.active]
    assert cleared and cleared[0].alert.kind == "accept_collapse"


def test_gpu_xid_off_bus_and_throttle() -> None:
    eng, _ = _engine()
    eng.handle(_gpu(health="fault", fault="XID 79"))
    assert [a.kind for a in eng.alerts()] == ["gpu_xid"]
    eng.handle(_gpu(health="fault", fault="GPU is lost"))
    assert [a.kind for a in eng.alerts()] == ["gpu_off_bus"]
    eng.handle(_gpu(throttle_reasons=["sw_power_cap"]))  # not in the default list: no alert
    assert eng.alerts() == []
    eng.handle(_gpu(throttle_reasons=["hw_thermal_slowdown", "sw_power_cap"]))
    [a] = eng.alerts()
    assert a.kind == "gpu_throttle" and a.severity == "warning" and "hw_thermal_slowdown" in a.message


def test_repeated_restarts_and_the_window_passing() -> None:
    eng, _ = _engine(AlertOptions(restart_count=3, restart_window_s=100))
    t = 1000.0
    for _ in range(3):
        eng.handle(_svc("ready", 3.0), now=t)
        eng.handle(_svc("crashed"), now=t + 1)
        eng.handle(_svc("starting"), now=t + 2)
        t += 10
    [a] = eng.alerts()
    assert a.kind == "restart_loop" and "3 times" in a.message
    eng.tick(now=t + 200)
    assert eng.alerts() == []


def test_restarts_asked_for_are_not_a_loop_and_a_fresh_server_is_not_a_collapse() -> None:
    """Issue 29: three user restarts, or a sweep's relaunches while it holds the service, raise no restart
    loop; the fresh server's first numbers (0.00, or one low figure) are not a collapse of the old window;
    a crash loop (each relaunch dies: the user asked for the launch, not for the crash) still is one."""
    eng, _ = _engine(AlertOptions(restart_count=3, restart_window_s=600, accept_min_samples=3))
    t, pid = 1000.0, 100
    for i in range(4):
        eng.handle(_svc("ready", 3.4, pid, seen=t + i), now=t + i)
    for _ in range(3):  # the user restarts it three times
        eng.handle(_planned("restart"), now=t)
        eng.handle(_svc("starting", None, pid + 1), now=t + 1)
        pid += 1
        eng.handle(_svc("ready", 0.0, pid, seen=t + 2), now=t + 2)  # a fresh server: nothing decoded yet
        eng.handle(_svc("ready", 1.2, pid, seen=t + 3), now=t + 3)  # its first window: one low figure
        t += 10
    assert eng.alerts() == []
    eng.handle(_planned("hold", "sweep X"), now=t)
    for _ in range(3):  # the sweep's relaunches: deploys with a new config, one point that fails to start
        eng.handle(_planned("deploy", "sweep X"), now=t)
        eng.handle(_svc("stopped"), now=t)
        eng.handle(_svc("starting", None, pid + 1), now=t + 1)
        pid += 1
        eng.handle(_svc("crashed", None, pid), now=t + 2)
        t += 10
    eng.handle(_planned("release", "sweep X"), now=t)
    assert eng.alerts() == []
    # warmed up on real traffic, then a real collapse of the same process
    for i in range(3):
        eng.handle(_svc("ready", 3.4, pid, seen=t + i), now=t + i)
    eng.handle(_svc("ready", 3.4, pid, seen=t + 2), now=t + 3)  # the same observation again: no new sample
    eng.handle(_svc("ready", 1.2, pid, seen=t + 4), now=t + 4)
    assert [a.kind for a in eng.alerts()] == ["accept_collapse"]
    # a crash loop: the user relaunches, it dies each time
    for _ in range(3):
        eng.handle(_planned("launch"), now=t)
        pid += 1
        eng.handle(_svc("crashed", None, pid), now=t + 1)  # died before it was seen starting
        t += 10
    [loop] = [a for a in eng.alerts() if a.kind == "restart_loop"]
    assert "3 times in 600 s" in loop.message and "crashed" in loop.message


def test_a_sweep_run_from_another_process_relaunching_the_service_is_not_a_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `sweep` started in a shell holds the service (its hold file) and relaunches it while the TUI's fleet
    watches: no restart loop there while the hold is alive; once that process is gone, restarts count again."""
    import subprocess
    import sys

    from ddtree_tui.alerts import held_elsewhere
    from ddtree_tui.config import parse_profile
    from tests.procs import stop_child

    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))
    text = f'name = "h"\naddress = "local"\nworkdir = "{tmp_path / "wd"}"\n'
    (tmp_path / "h.toml").write_text(text)
    holder = (
        "import sys\nfrom pathlib import Path\nfrom ddtree_tui.config import parse_profile\n"
        "from ddtree_tui.services import holdfiles\n"
        "p = parse_profile(Path(sys.argv[1]).read_text())\n"
        "holdfiles.acquire('h/dflash', 'sweep S', holdfiles.place_of(p))\nprint('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", holder, str(tmp_path / "h.toml")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    out: list[Any] = []
    prof = parse_profile(text)
    eng = AlertEngine(lambda host: AlertOptions(restart_count=3), out.append, held_elsewhere(lambda: [prof]))
    t = 1000.0

    def relaunch_three_times() -> None:
        nonlocal t
        for _ in range(3):
            eng.handle(_svc("ready", 3.0), now=t)
            eng.handle(_svc("starting"), now=t + 1)
            t += 10

    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        relaunch_three_times()
        assert eng.alerts() == []
    finally:
        stop_child(child)
    relaunch_three_times()
    assert [a.kind for a in eng.alerts()] == ["restart_loop"]


@pytest.mark.timeout(120)
async def test_xid_alert_reaches_metrics_and_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prometheus: Callable[[list[str]], Prometheus]
) -> None:
    monkeypatch.chdir(tmp_path)
    dcgm = FakeDcgm([FakeGpu("node-a", 0, util=50, fb_used=1000, fb_free=142771, power=300, temp=50)])
    exporter_port = free_port()
    runner = await start_exporter(dcgm, exporter_port)
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    try:
        prom = await asyncio.to_thread(prometheus, [f"127.0.0.1:{exporter_port}"])
        await asyncio.to_thread(prom.wait_query, 'DCGM_FI_DEV_GPU_UTIL{Hostname="node-a"}', 30, "DCGM series")
        (tmp_path / "a.toml").write_text(
            f'name = "node-a"\n[telemetry]\nsource = "prometheus"\nprometheus_url = "{prom.url}"\ninterval_ms = 300\n',
            encoding="utf-8",
        )
        fleet = Fleet([load_profile(tmp_path / "a.toml")], todos_path=tmp_path / "t.json")
        port = free_port()
        colls: list[Collector] = []
        task = asyncio.create_task(serve(fleet, "127.0.0.1", port, stop=stop, setup=colls.append))
        url = f"http://127.0.0.1:{port}"
        async with httpc.AClient(timeout=10) as client:
            while not (colls and colls[0].ready):
                await asyncio.sleep(0.1)
            events: list[dict[str, Any]] = []

            async def follow() -> None:
                async with (
                    http.session(timeout=10, read_timeout=60) as stream,
                    stream.get(f"{url}/events") as r,
                ):
                    async for line in http.iter_lines(r):
                        if line.startswith("data: "):
                            events.append(json.loads(line[6:]))

            reader = asyncio.create_task(follow())
            await asyncio.sleep(0.5)
            dcgm.gpus[0].xid = 79  # the GPU reports an XID
            want = 'ddtree_alert_active{alert="gpu_xid",host="node-a",subject="gpu0"} 1.0'
            text = ""
            for _ in range(100):
                text = (await client.get(f"{url}/metrics")).text
                if want in text:
                    break
                await asyncio.sleep(0.2)
            assert want in text
            assert 'ddtree_alerts_fired_total{alert="gpu_xid"} 1.0' in text
            [active] = (await client.get(f"{url}/alerts")).json()["alerts"]
            assert (active["kind"], active["host"], active["subject"]) == ("gpu_xid", "node-a", "gpu0")
            assert active["message"] == "GPU 0: XID 79"
            alerts = [e for e in events if e["kind"] == "alert"]
            assert alerts and alerts[0]["alert"]["kind"] == "gpu_xid" and alerts[0]["alert"]["active"]
            assert any(e["kind"] == "notice" and "ALERT node-a/gpu0" in e["text"] for e in events)
            dcgm.gpus[0].xid = 0  # cleared
            for _ in range(100):
                text = (await client.get(f"{url}/metrics")).text
                if "ddtree_alert_active{" not in text:
                    break
                await asyncio.sleep(0.2)
            assert "ddtree_alert_active{" not in text
            assert (await client.get(f"{url}/alerts")).json() == {"alerts": []}
            reader.cancel()
    finally:
        stop.set()
        if task is not None:
            await task
        await runner.cleanup()


@pytest.mark.timeout(180)
@pytest.mark.slow
async def test_a_fleet_raises_no_alert_for_restarts_asked_for_and_one_for_a_crash_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, on a real fleet and real simulated servers: a warmed-up accept window, then as many restarts
    through Fleet.do as the loop threshold and a sweep's relaunches raise no alert (and no collapse of the fresh
    servers); a service that dies at every launch does. The threshold is 2 (the engine's rule is the same at any
    threshold, tested at 3 above): each relaunch is a simulator process start and stop."""
    import sys

    from ddtree_tui.config import parse_profile
    from ddtree_tui.model.intents import Launch, Restart
    from ddtree_tui.sweep.runner import SweepRunner, SweepSettings
    from ddtree_tui.sweep.spec import parse_set
    from tests.fixtures.services.support import cleanup_workdir

    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))
    # the simulators 10 times faster (a launch, a request, a sweep point): what is checked is which alerts the
    # fleet raises for the relaunches, not the simulated pace; the accept lengths are the same
    monkeypatch.setenv(TIME_SCALE_ENV, "10")
    wd, port = tmp_path / "wd", free_port()
    sim = "[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    prof = parse_profile(
        f'name = "h"\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{wd}"\n'
        '[telemetry]\nsource = "none"\n[alerts]\naccept_min_samples = 2\nrestart_count = 2\n'
        f'[[service]]\nname = "ok"\nalgorithm = "ddtree"\nmode = "tree"\nlauncher = "sim"\nport = {port}\n'
        f"budget = 16\nstartup_timeout = 30\n{sim}"
        f'[[service]]\nname = "bad"\nalgorithm = "ddtree"\nmode = "tree"\nlauncher = "sim"\nport = {free_port()}\n'
        f"budget = 16\nstartup_timeout = 30\n{sim}hybrid = true\n"
    )
    fleet = Fleet(
        [prof], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", probe_interval=0.3
    )
    q = fleet.subscribe()
    alerts: list[AlertChanged] = []

    async def collect() -> None:  # read as they come: a queue left unread drops its oldest events
        while True:
            ev = await q.get()
            if isinstance(ev, AlertChanged):
                alerts.append(ev)

    reader = asyncio.create_task(collect())
    try:
        await fleet.start()

        async def ready(ref: str) -> None:
            st = await fleet.wait_service(ref, {"ready"}, 30)
            assert st.state == "ready", st

        def accept_seen() -> float | None:
            st = fleet.snapshot().service("h", "ok")
            return st.observed_at.get("accept_length") if st is not None else None

        async def traffic(n: int) -> None:
            async with httpc.AClient(timeout=30) as client:
                for _ in range(n):
                    before = accept_seen()
                    body = {"text": "hi", "sampling_params": {"max_new_tokens": 200}}
                    r = await client.post(f"http://127.0.0.1:{port}/generate", json=body)
                    assert r.status_code == 200, r.text
                    # each request's accept length read by the fleet before the next (a sample of its own in
                    # the window), and a /metrics read between requests: waited for, then one probe interval
                    await until(lambda b=before: accept_seen() != b, 20, "the request's accept length read")
                    await asyncio.sleep(0.3)

        assert (await fleet.do(Launch(ref="h/ok"))).ok
        await ready("h/ok")
        await traffic(3)  # a warmed-up window of real decode traffic
        for _ in range(2):  # the user restarts it as often as the threshold
            out = await fleet.do(Restart(ref="h/ok"))
            assert out.ok, out.message
            await ready("h/ok")
            await asyncio.sleep(1.0)  # the fresh server's first reads (accept length 0.00)
        settings = SweepSettings(ref="h/ok", dims=[parse_set("budget=8,12")], repeats=1, warmup=0,
                                 max_new_tokens=16)  # fmt: skip
        state = await SweepRunner(fleet, settings, tmp_path / "sweep").run()
        assert [p.status for p in state.points] == ["done", "done"]
        for _ in range(2):  # the user launches a service that dies at start, as often as the threshold
            await fleet.do(Launch(ref="h/bad"))
            st = await fleet.wait_service("h/bad", {"crashed"}, 30)
            assert st.state == "crashed", st
        await asyncio.sleep(0.5)
        raised = [(e.alert.kind, e.alert.subject) for e in alerts if e.alert.active]
        assert raised == [("restart_loop", "bad")], [e.alert for e in alerts]
    finally:
        reader.cancel()
        fleet.unsubscribe(q)
        await fleet.stop()
        cleanup_workdir(wd)

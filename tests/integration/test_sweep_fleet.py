"""A sweep through the Fleet in this process: while it runs the service is held (launch, kill, restart and
move from anyone else are refused with a message); the hold ends with the sweep; `--max-time` skips what
would not fit and the service is still put back; the SSH variant runs the same sweep on a remote host."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.sim.config import TIME_SCALE_ENV
from ddtree_tui.sweep.runner import SweepEvent, SweepRunner, SweepSettings
from ddtree_tui.sweep.spec import parse_set
from tests.fixtures.services.support import cleanup_workdir
from tests.integration.test_sweep import cli_here
from tests.util import free_port

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _holds_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))
    # The simulators a local host launches run 10x fast (load time, decode steps; the sshd test's remote ones
    # do not get this environment): these tests check holds, what is measured and what is put back, not the
    # simulated pace.
    monkeypatch.setenv(TIME_SCALE_ENV, "10")


def _sim_service(port: int) -> str:
    return (
        f'[[service]]\nname = "dd"\nalgorithm = "ddtree"\nmode = "tree"\nlauncher = "sim"\nport = {port}\n'
        "budget = 16\nstartup_timeout = 30\n[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    )


@pytest.mark.slow
async def test_sweep_holds_the_service_and_releases_it(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    prof = parse_profile(f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n{_sim_service(free_port())}')
    fleet = Fleet([prof], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", telemetry=False,
                  probe_interval=0.3)  # fmt: skip
    measuring = asyncio.Event()
    events: list[SweepEvent] = []

    def on_event(ev: SweepEvent) -> None:
        events.append(ev)
        if ev.status == "measuring" and ev.index >= 0:
            measuring.set()

    settings = SweepSettings(
        ref="h/dd", dims=[parse_set("budget=8,16")], repeats=1, warmup=0, max_new_tokens=16
    )
    try:
        await fleet.start()
        runner = SweepRunner(fleet, settings, tmp_path / "out", on_event=on_event)
        n, secs, _how = runner.estimate()
        assert n == 2 and secs > 0
        task = asyncio.create_task(runner.run())
        await asyncio.wait_for(measuring.wait(), 60)
        refused = [await fleet.kill("h/dd"), await fleet.launch("h/dd"), await fleet.restart("h/dd")]
        for r in refused:
            assert not r.ok and "held by sweep" in r.message and "nothing was done" in r.message, r.message
        assert fleet.held_by("h/dd") is not None
        assert list((tmp_path / "holds").glob("*.json"))  # visible to other processes on this machine
        state = await asyncio.wait_for(task, 120)
        assert [p.status for p in state.points] == ["done", "done"] and state.restored is True
        assert fleet.held_by("h/dd") is None and not list((tmp_path / "holds").glob("*.json"))
        assert fleet.current_spec("h/dd").budget == 16  # the profile's value again
        assert {e.status for e in events} >= {"starting", "measuring", "done"}
        # --max-time that nothing fits in: every point skipped, the service still put back
        tight = settings.model_copy(update={"max_time": 0.01})
        st2 = await SweepRunner(fleet, tight, tmp_path / "out2").run()
        assert {p.status for p in st2.points} == {"skipped"} and st2.restored is True
        assert "--max-time" in (st2.points[0].error or "")
    finally:
        await fleet.stop()
        cleanup_workdir(wd)


@pytest.mark.slow
@pytest.mark.sshd
def test_sweep_through_real_sshd(tmp_path: Path, ssh_env, sshd) -> None:
    """Two points on a remote host: launched over ssh, measured through the port forward, put back."""
    port = free_port()
    extra = f"python = {json.dumps(sys.executable)}\nconnect_timeout = 5\n\n{_sim_service(port)}"
    prof = tmp_path / "testhost.toml"
    prof.write_text(ssh_env.profile_toml("testhost", extra=extra))
    out = tmp_path / "out"
    try:
        argv = ["--profile", str(prof), "sweep", "testhost/dd",
                "--set", "budget=8,16", "--set", "env.SGLANG_DDTREE_MAX_TOPK=2", "--repeats", "1",
                "--warmup", "0", "--max-new-tokens", "16", "--out", str(out), "--no-telemetry"]  # fmt: skip
        # in this process (nobody signals it: its files and output are what is checked)
        (p,) = cli_here(tmp_path, argv)
        assert p.returncode == 0, p.stderr[-3000:]
        state = json.loads((out / "sweep.json").read_text())
        assert [q["status"] for q in state["points"]] == ["done", "done"] and state["restored"] is True
        for q in state["points"]:
            assert q["server_info"]["speculative_ddtree_budget"] == int(q["overrides"]["budget"])
            assert q["measurement"]["metrics"]["n"] == 3 and q["measurement"]["metrics"]["failed"] == 0
        assert "best: #" in p.stdout
    finally:
        cleanup_workdir(ssh_env.root / "work-testhost")


@pytest.mark.slow
async def test_reference_baseline_interleaved_and_load_levels(tmp_path: Path) -> None:
    """--baseline HOST/SVC: the reference service runs in the same bench run as each point (paired deltas);
    --load concurrency:1,2: one restart for the config, then one measurement per level."""
    wd = tmp_path / "wd"
    ref_svc = (
        f'[[service]]\nname = "ref"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {free_port()}\n'
        "[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    )
    prof = parse_profile(
        f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n{_sim_service(free_port())}{ref_svc}'
    )
    fleet = Fleet([prof], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", telemetry=False,
                  probe_interval=0.3)  # fmt: skip
    events: list[SweepEvent] = []
    settings = SweepSettings(ref="h/dd", dims=[parse_set("budget=16")], loads=[1, 2], repeats=2, warmup=0,
                             max_new_tokens=16, baseline_ref="h/ref")  # fmt: skip
    try:
        await fleet.start()
        r = await fleet.launch("h/ref")
        assert r.ok, r.message
        st = await fleet.wait_service("h/ref", {"ready"}, 30)
        assert st.state == "ready"
        state = await SweepRunner(fleet, settings, tmp_path / "out", on_event=events.append).run()
        assert [(p.concurrency, p.status) for p in state.points] == [(1, "done"), (2, "done")]
        assert [e.index for e in events if e.status == "starting"].count(
            0
        ) == 1  # one restart for both levels
        assert not any(e.index == 1 and e.status == "starting" for e in events)
        assert state.baselines == []  # nothing re-measured on the swept service itself
        for p in state.points:
            assert p.baseline_measurement is not None and len(p.baseline_measurement.samples) == 6
            assert p.measurement is not None and len(p.measurement.samples) == 6
        from ddtree_tui.sweep import results as rs

        res = rs.analyse(state)
        assert res.baseline == "h/ref" and all(
            q.delta_pct is not None and q.delta_lo_pct is not None for q in res.points
        )
    finally:
        await fleet.stop()
        cleanup_workdir(wd)


_HOLDER = """
import sys
from pathlib import Path
from ddtree_tui.config import parse_profile
from ddtree_tui.services import holdfiles
prof = parse_profile(Path(sys.argv[1]).read_text())
holdfiles.acquire("h/dd", "sweep other-checkout", holdfiles.place_of(prof))
print("held", flush=True)
sys.stdin.read()  # hold until the test closes our stdin
"""


@pytest.mark.slow
async def test_a_sweep_in_another_checkout_does_not_block_a_launch_here(tmp_path: Path) -> None:
    """Another ddtree-tui process holds `h/dd` of a profile with the same name but another workdir (another
    checkout): our launch of h/dd goes ahead. A holder of the same h/dd in the same workdir still refuses it."""
    from tests.procs import stop_child

    wd, other_wd = tmp_path / "wd", tmp_path / "other" / "wd"
    body = _sim_service(free_port())
    prof = parse_profile(f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n{body}')
    (tmp_path / "other.toml").write_text(f'name = "h"\naddress = "local"\nworkdir = "{other_wd}"\n{body}')
    (tmp_path / "same.toml").write_text(f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n{body}')
    fleet = Fleet([prof], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", telemetry=False,
                  probe_interval=0.3)  # fmt: skip

    def holder(profile: str) -> subprocess.Popen[str]:
        child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path / profile)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        return child

    other = holder("other.toml")
    try:
        await fleet.start()
        assert fleet.held_elsewhere("h/dd") is None
        r = await fleet.launch("h/dd")
        assert r.ok, r.message
        k = await fleet.kill("h/dd")
        assert k.ok, k.message
        same = holder("same.toml")
        try:
            r = await fleet.launch("h/dd")
            assert not r.ok and "held by sweep other-checkout" in r.message, r.message
            assert fleet.held_elsewhere("h/dd") == f"sweep other-checkout (pid {same.pid})"
        finally:
            stop_child(same)
    finally:
        stop_child(other)
        await fleet.stop()
        cleanup_workdir(wd)

"""Service lifecycle on this machine (LocalTransport): real child processes, real HTTP, real signals."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_tui import cli
from ddtree_tui.config import parse_profile
from ddtree_tui.services.launchline import argv_hash, build_launch
from ddtree_tui.services.lifecycle import move_service
from tests.fixtures.services.support import (
    cleanup_workdir,
    local_manager,
    profile_toml,
    service_toml,
    service_workdir,
    started_manager,
    starttime,
)
from tests.procs import alive
from tests.util import free_port

pytestmark = pytest.mark.timeout(60)


workdir = pytest.fixture(name="workdir")(service_workdir)


def _profile(workdir: Path, services: str, name: str = "loc"):
    return parse_profile(profile_toml(name, "local", workdir, services))


async def test_launch_ready_kill_stopped(workdir: Path) -> None:
    port = free_port()
    prof = _profile(workdir, service_toml("a", port, env={"FAKE_CHILD": "1"}))
    lines: list[tuple[str, str]] = []
    metrics: list = []
    async with started_manager(
        prof, on_log=lambda n, line: lines.append((n, line)), on_metrics=lambda n, x: metrics.append(x)
    ) as (m, seen):
        r = await m.launch("a")
        assert r.ok, r.message
        pid = r.status.pid
        assert r.status.state == "starting" and pid
        st = await m.wait_state("a", {"ready"}, 15)
        assert st.state == "ready", st
        assert any(s.state == "starting" for s in seen)
        assert st.version == "0.0.0-fake" and st.model == "/models/T" and st.health_latency_ms is not None
        rec = json.loads((workdir / "run" / "a.json").read_text())
        cmd = build_launch(prof, prof.services[0])
        assert rec["pid"] == pid and rec["argv"] == cmd.argv and rec["argv_hash"] == argv_hash(cmd.argv)
        assert rec["starttime"] == starttime(pid)
        # the fake starts a child in its group: every pid of the group maps to the service
        for _ in range(50):
            if len(m.service_pids()) >= 3:
                break
            await asyncio.sleep(0.1)
        pids = m.service_pids()
        assert pids[pid] == "a" and len(pids) >= 3
        # log lines arrive and are parsed
        for _ in range(50):
            if metrics:
                break
            await asyncio.sleep(0.1)
        assert metrics and metrics[-1].accept_len == 3.42
        assert any(n == "a" and "Decode batch" in x for n, x in lines)
        st = m.status("a")
        assert st.accept_length == 3.42 and st.gen_throughput == 140.62
        # a second launch is refused
        r2 = await m.launch("a")
        assert not r2.ok and "already running" in r2.message
        k = await m.kill("a")
        assert k.ok and "SIGTERM" in k.message, k.message
        st = await m.wait_state("a", {"stopped"}, 5)
        assert st.state == "stopped" and st.pid is None and st.accept_length is None
        assert not alive(pid)
        assert not any(alive(p) for p in pids)
        assert not (workdir / "run" / "a.json").exists()
        assert (await m.kill("a")).message.endswith("is not running")
        log = await m.read_log("a", 5)
        assert any("exited: signal 15" in x for x in log)


async def test_crash_detected_with_exit_status_and_log(workdir: Path) -> None:
    prof = _profile(workdir, service_toml("c", free_port(), env={"FAKE_CRASH_AFTER": "0.8"}))
    async with started_manager(prof) as (m, _):
        assert (await m.launch("c")).ok
        st = await m.wait_state("c", {"crashed"}, 15)
        assert st.state == "crashed", st
        assert st.detail == "exited with status 3"
        assert any("fake crash" in x for x in st.last_log) and len(st.last_log) <= 20
        # kill on a crashed service cleans the stale pidfile and says so
        k = await m.kill("c")
        assert k.ok and "stale pidfile" in k.message
        assert (await m.wait_state("c", {"stopped"}, 5)).state == "stopped"


async def test_port_in_use_refused_with_holder_and_next_free_port(workdir: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    try:
        prof = _profile(workdir, service_toml("p", port))
        m, _ = await local_manager(prof)
        r = await m.launch("p")
        assert not r.ok
        assert f"port {port} on loc is already in use by pid {os.getpid()}" in r.message, r.message
        assert r.suggestion and "set port = " in r.suggestion
        nxt = int(r.suggestion.split("set port = ")[1].split()[0])
        assert nxt > port
        with socket.socket() as s2:
            s2.bind(("127.0.0.1", nxt))  # really free
        assert not (workdir / "run" / "p.json").exists()
    finally:
        sock.close()


def _start_sleep() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


@pytest.mark.parametrize("variant", ["pid-reused", "foreign"])
async def test_foreign_process_is_never_signalled(workdir: Path, variant: str) -> None:
    prof = _profile(workdir, service_toml("f", free_port()))
    victim = _start_sleep()
    try:
        real_start = starttime(victim.pid)
        argv = build_launch(prof, prof.services[0]).argv
        rec = {"pid": victim.pid, "pgid": victim.pid, "argv": argv, "argv_hash": argv_hash(argv), "port": 1,
               "starttime": real_start + 7 if variant == "pid-reused" else real_start, "started_at": time.time()}  # fmt: skip
        (workdir / "run").mkdir(parents=True)
        (workdir / "run" / "f.json").write_text(json.dumps(rec))
        m, _ = await local_manager(prof)
        await m.refresh()
        assert m.status("f").state == "crashed"  # our process is gone, whatever holds the pid now
        assert "another process" in (m.status("f").detail or "")
        k = await m.kill("f", timeout=0.5)
        assert not k.ok
        assert f"refused to signal pid {victim.pid}" in k.message and "sleep 60" in k.message
        await asyncio.sleep(0.3)
        assert victim.poll() is None  # still alive: never signalled
        assert not (workdir / "run" / "f.json").exists()  # stale pidfile cleaned
        assert m.status("f").state == "stopped"
    finally:
        victim.kill()
        victim.wait()


async def test_kill_escalates_to_sigkill_when_term_is_ignored(workdir: Path) -> None:
    prof = _profile(workdir, service_toml("t", free_port(), env={"FAKE_IGNORE_TERM": "1"}))
    m, _ = await local_manager(prof)
    r = await m.launch("t")
    assert r.ok
    assert (await m.wait_state("t", {"ready"}, 15)).state == "ready"
    t0 = time.monotonic()
    k = await m.kill("t", timeout=0.5)
    assert k.ok and "SIGKILL" in k.message, k.message
    assert 0.4 < time.monotonic() - t0 < 10
    assert not alive(r.status.pid)
    assert m.status("t").state == "stopped"


async def test_old_server_info_fallback_and_unhealthy(workdir: Path) -> None:
    prof = _profile(workdir, service_toml("o", free_port(), env={"FAKE_OLD": "1"}))
    async with started_manager(prof) as (m, _):
        assert (await m.launch("o")).ok
        st = await m.wait_state("o", {"ready"}, 15)
        assert st.version == "0.0.0-fake" and st.accept_length is not None
        # stop the process behind our back with SIGSTOP: alive, health failing -> unhealthy with since and why
        os.kill(st.pid, 19)
        try:
            st2 = await m.wait_state("o", {"unhealthy"}, 15)
            assert st2.state == "unhealthy" and "timed out" in (st2.detail or "") and st2.since
        finally:
            os.kill(st.pid, 18)
        assert (await m.wait_state("o", {"ready"}, 15)).state == "ready"
        assert (await m.kill("o")).ok


async def test_simulator_launcher_starting_ready_kill(workdir: Path) -> None:
    port = free_port()
    prof = parse_profile(
        f'name = "local"\naddress = "local"\npython = "python3"\nworkdir = "{workdir}"\n[[service]]\n'
        f'name = "sim"\nalgorithm = "ddtree"\nmode = "shadow-linear"\nlauncher = "sim"\nport = {port}\n'
        "kill_timeout = 5\n[service.sim]\naccept_length = 3.4\nload_time = 0.5\nseed = 1\n"
    )
    async with started_manager(prof) as (m, seen):
        assert build_launch(prof, prof.services[0]).argv[0] == sys.executable
        assert (await m.launch("sim")).ok
        st = await m.wait_state("sim", {"ready"}, 20)
        assert st.state == "ready", st
        assert any(s.state == "starting" for s in seen)
        assert (await m.kill("sim")).ok
        assert (await m.wait_state("sim", {"stopped"}, 5)).state == "stopped"


@pytest.mark.slow
async def test_move_from_a_crashed_host(tmp_path: Path) -> None:
    port = free_port()
    wa, wb = tmp_path / "a", tmp_path / "b"
    try:
        # crashes 3 s after it starts: long enough for hostb's watcher to see it ready first on a busy machine
        # (after 0.5 s, it crashed there before the first probe came)
        pa = _profile(wa, service_toml("svc", port, env={"FAKE_CRASH_AFTER": "3"}), name="hosta")
        pb = _profile(wb, "", name="hostb")
        ma, _ = await local_manager(pa)
        mb, _ = await local_manager(pb)
        assert (await ma.launch("svc")).ok
        assert (await ma.wait_state("svc", {"crashed"}, 15)).state == "crashed"
        r = await move_service(ma, mb, "svc")
        assert r.ok, r.message
        assert r.status.host == "hostb" and r.status.state == "ready"
        assert "moved svc from hosta to hostb" in r.message
        assert [s.name for s in mb.statuses()] == ["svc"]
        assert (wb / "run" / "svc.json").exists() and not (wa / "run" / "svc.json").exists()
        # the moved spec still crashes after 3 s by design; kill cleans up either way
        assert (await mb.kill("svc")).ok
    finally:
        cleanup_workdir(wa)
        cleanup_workdir(wb)


async def test_a_move_timeout_is_for_that_move_only(tmp_path: Path) -> None:
    """`move --timeout`: the new one gets that long to become ready; the source's own spec is not edited."""
    port = free_port()
    wa, wb = tmp_path / "a", tmp_path / "b"
    try:
        pa = _profile(wa, service_toml("svc", port, env={"FAKE_LOAD_TIME": "30"}), name="hosta")
        pb = _profile(wb, "", name="hostb")
        ma, _ = await local_manager(pa)
        mb, _ = await local_manager(pb)
        before = ma.spec("svc")
        r = await move_service(ma, mb, "svc", startup_timeout=1.0)
        assert not r.ok and "did not become ready" in r.message, r.message
        assert "hosta/svc left as it was" in r.message
        assert ma.spec("svc") == before
        assert (await mb.kill("svc")).ok
    finally:
        cleanup_workdir(wa)
        cleanup_workdir(wb)


@pytest.mark.slow
def test_cli_dry_run_launch_kill_and_usage(
    workdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    pf = tmp_path / "loc.toml"
    pf.write_text(profile_toml("loc", "local", workdir, service_toml("a", port)))
    prof = parse_profile(pf.read_text())
    assert cli.main(["launch", "loc/a", "--dry-run", "--profile", str(pf)]) == 0
    assert capsys.readouterr().out.strip() == build_launch(prof, prof.services[0]).display()
    assert cli.main(["launch", "loc/a", "--profile", str(pf), "--timeout", "20"]) == 0
    out = capsys.readouterr().out
    assert "launched loc/a" in out and "loc/a: ready" in out
    assert cli.main(["launch", "loc/a", "--profile", str(pf)]) == 1
    assert "already running" in capsys.readouterr().out
    assert cli.main(["logs", "loc/a", "-n", "3", "--profile", str(pf)]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    assert cli.main(["restart", "loc/a", "--profile", str(pf), "--timeout", "20"]) == 0
    assert "loc/a: ready" in capsys.readouterr().out
    assert cli.main(["kill", "loc/a", "--profile", str(pf)]) == 0
    assert "stopped loc/a" in capsys.readouterr().out
    assert cli.main(["kill", "loc/nope", "--profile", str(pf)]) == 2
    assert "has no service 'nope'" in capsys.readouterr().err
    assert cli.main(["kill", "noslash", "--profile", str(pf)]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nwat = 1\n')
    assert cli.main(["kill", "x/a", "--profile", str(bad)]) == 2
    assert "bad.toml" in capsys.readouterr().err


async def test_external_service_health_as_it_is(workdir: Path) -> None:
    """A server ddtree-tui did not start (launcher = "external", no model paths): ready while it serves, even
    though no pidfile of ours describes it, never "stopped"; launch and kill are refused; when it goes away
    it shows as not answering. It runs the real server's /health latency (about 1 s)."""
    from ddtree_tui.sim.config import SimConfig
    from ddtree_tui.sim.server import SimServer

    async with SimServer(SimConfig(health_latency=0.3)) as sim:
        services = (
            f'[[service]]\nname = "ext"\nalgorithm = "dflash"\nlauncher = "external"\nport = {sim.port}\n'
        )
        prof = _profile(workdir, services)
        m, seen = await local_manager(prof)
        try:
            await m.start()
            st = await m.wait_state("ext", {"ready"}, 10)
            assert st.state == "ready" and st.pid is None and st.detail == "external", st
            assert st.version == "0.5.23-sim" and (st.health_latency_ms or 0) >= 300
            assert not any(s.name == "ext" and s.state == "stopped" for s in seen)
            r = await m.launch("ext")
            assert not r.ok and "external" in r.message
            k = await m.kill("ext")
            assert not k.ok and "does not stop it" in k.message
            await sim.stop()
            st = await m.wait_state("ext", {"unhealthy"}, 10)
            assert st.state == "unhealthy" and "not answering" in (st.detail or ""), st
            assert not any(s.name == "ext" and s.state == "stopped" for s in seen)
        finally:
            await m.stop()

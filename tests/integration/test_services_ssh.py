"""Service lifecycle through the real test sshd (SshTransport): launch detached over ssh, watch, probe
through the port forward, kill, crash detection, foreign-process refusal, host unreachable."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.services.launchline import argv_hash, build_launch
from ddtree_tui.services.lifecycle import ServiceManager
from ddtree_tui.transport import make_transport
from tests.fixtures.services.support import cleanup_workdir, profile_toml, service_toml
from tests.procs import alive
from tests.util import free_port

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(90)]


def _start_victim() -> tuple[subprocess.Popen[bytes], int]:
    """A process we start ourselves and that no pidfile of ours describes: it must never be signalled."""
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    return victim, int(Path(f"/proc/{victim.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


async def _ssh_manager(ssh_env, services: str, **kw):
    wd = ssh_env.root / "work-testhost"
    prof = parse_profile(profile_toml("testhost", "testhost", wd, services))
    t = make_transport(prof)
    await t.start()
    assert await t.wait_connected(10), t.status
    seen: list = []
    m = ServiceManager(t, prof, probe_interval=0.2, health_timeout=2, on_status=seen.append, **kw)
    return prof, t, m, seen, wd


async def test_ssh_launch_ready_kill_crash_and_follow(ssh_env, sshd) -> None:
    port = free_port()
    services = service_toml("a", port) + service_toml("c", free_port(), env={"FAKE_CRASH_AFTER": "0.8"})
    _prof, t, m, seen, wd = await _ssh_manager(ssh_env, services)
    metrics: list = []
    m.on_metrics = lambda n, x: metrics.append((n, x))
    try:
        await m.start()
        st0 = await m.wait_state("a", {"stopped"}, 10)
        assert st0.state == "stopped", st0
        r = await m.launch("a")
        assert r.ok, r.message
        pid = r.status.pid
        st = await m.wait_state("a", {"ready"}, 20)
        assert st.state == "ready", st
        assert any(s.name == "a" and s.state == "starting" for s in seen)
        assert st.version == "0.0.0-fake"
        base = await m.base_url("a")
        assert base.startswith("http://127.0.0.1:")
        # the service outlives the ssh session that launched it: it runs in its own session
        assert psutil.Process(pid).is_running() and psutil.Process(pid).ppid() != 0
        for _ in range(60):
            if any(n == "a" for n, _ in metrics):
                break
            await asyncio.sleep(0.1)
        assert any(n == "a" and x.accept_len == 3.42 for n, x in metrics)
        # follow_log shares the running follower; read_log reads the tail
        agen = m.follow_log("a")
        line = await asyncio.wait_for(anext(agen), 5)
        await agen.aclose()
        assert "Decode batch" in line
        assert len(await m.read_log("a", 4)) == 4
        # crash detection over ssh
        assert (await m.launch("c")).ok
        stc = await m.wait_state("c", {"crashed"}, 20)
        assert stc.state == "crashed" and stc.detail == "exited with status 3"
        assert any("fake crash" in x for x in stc.last_log)
        k = await m.kill("a")
        assert k.ok and "SIGTERM" in k.message, k.message
        assert (await m.wait_state("a", {"stopped"}, 10)).state == "stopped"
        assert not alive(pid)
    finally:
        await m.stop()
        await t.close()
        cleanup_workdir(wd)


async def test_ssh_foreign_pid_refused_and_unreachable_host(ssh_env, sshd) -> None:
    services = service_toml("f", free_port())
    prof, t, m, _seen, wd = await _ssh_manager(ssh_env, services)
    victim, start = _start_victim()
    try:
        argv = build_launch(prof, prof.services[0]).argv
        (wd / "run").mkdir(parents=True)
        (wd / "run" / "f.json").write_text(json.dumps(
            {"pid": victim.pid, "pgid": victim.pid, "starttime": start, "argv": argv, "argv_hash": argv_hash(argv),
             "port": 1, "started_at": time.time()}))  # fmt: skip
        # the pidfile's argv matches, the start time too, but the command line is `sleep 60`: foreign
        k = await m.kill("f", timeout=0.5)
        assert not k.ok and f"refused to signal pid {victim.pid}" in k.message
        await asyncio.sleep(0.3)
        assert victim.poll() is None
        # host unreachable: state unknown, and a launch says why
        await m.start()
        assert (await m.wait_state("f", {"stopped"}, 10)).state == "stopped"
        sshd.stop()
        st = await m.wait_state("f", {"unknown"}, 20)
        assert st.state == "unknown" and "unreachable" in (st.detail or "")
        r = await m.launch("f")
        assert not r.ok and "cannot launch" in r.message
    finally:
        victim.kill()
        victim.wait()
        await m.stop()
        await t.close()
        cleanup_workdir(wd)


async def test_ssh_launch_refused_by_the_hosts_own_parser(ssh_env, sshd) -> None:
    """Through the real sshd, the host's Python runs its own `sglang.srt.server_args` (the fake package's,
    whose parser is 0.5.23's recorded flag table) on the exact argv: a flag that build rejects refuses the
    launch before anything starts, names the flag, the build's version and the rename; --force launches."""
    stale = service_toml(
        "old", free_port(), extra='extra_args = ["--mamba-scheduler-strategy", "extra_buffer"]'
    )
    dd = service_toml("dd", free_port()).replace(
        'algorithm = "dflash"', 'algorithm = "ddtree"\nmode = "shadow-linear"'
    )
    _prof, t, m, _seen, wd = await _ssh_manager(ssh_env, stale + dd)
    try:
        r = await m.launch("old")
        assert not r.ok, r.message
        assert r.message.startswith(
            "refused to launch testhost/old: SGLang 0.5.23 would reject its command line"
        )
        assert "unknown flag --mamba-scheduler-strategy; it is now --mamba-radix-cache-strategy" in r.message
        assert "--force" in (r.suggestion or "")
        # nothing started: no pidfile, no log, no process
        assert not (wd / "run" / "old.json").exists() and not (wd / "logs" / "old.log").exists()
        await m.refresh()
        assert m.status("old").state == "stopped"
        # a DDTree mode whose switch the profile does not name, on a build without DDTree
        r = await m.launch("dd")
        assert not r.ok and "needs [ddtree_flags] shadow_linear" in r.message
        assert "Unknown speculative algorithm name: DDTREE" in r.message
        # --force: launched anyway, and the result says what was overridden
        r = await m.launch("old", force=True)
        assert r.ok and "forced past the check" in r.message, r.message
        assert (await m.wait_state("old", {"ready"}, 20)).state == "ready"
        assert (await m.kill("old")).ok
    finally:
        await m.stop()
        await t.close()
        cleanup_workdir(wd)

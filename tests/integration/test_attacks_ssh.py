"""Issue 20 through the real test sshd (SshTransport): the planted workdir, a forged pidfile, two launches at
once and the orphaned process group, as an operator on another machine would meet them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.services.launchline import argv_hash, build_launch
from ddtree_tui.services.lifecycle import ServiceManager
from ddtree_tui.transport import make_transport
from tests.fixtures.services.support import (
    cleanup_workdir,
    processes_running,
    profile_toml,
    service_toml,
    starttime,
)
from tests.integration.test_attacks_local import _cmd, _start_sleep, attacker_workdir
from tests.integration.test_telemetry_ssh import install_fake_smi
from tests.procs import alive
from tests.util import free_port

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(120)]


async def _ssh(wd: Path, services: str, n: int = 1) -> tuple[list[ServiceManager], list]:
    prof = parse_profile(profile_toml("testhost", "testhost", wd, services))
    out, ts = [], []
    for _ in range(n):
        t = make_transport(prof)
        await t.start()
        assert await t.wait_connected(10), t.status
        ts.append(t)
        out.append(ServiceManager(t, prof, probe_interval=0.2, health_timeout=2))
    return out, ts


async def _close(ms: list[ServiceManager], ts: list) -> None:
    for m in ms:
        await m.stop()
    for t in ts:
        await t.close()


async def test_ssh_planted_workdir_refused_nothing_runs(ssh_env, sshd, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    wd = attacker_workdir(tmp_path, marker)
    (m,), ts = await _ssh(wd, service_toml("a", free_port()))
    try:
        r = await m.launch("a")
        assert not r.ok and "refused to launch testhost/a" in r.message and "uid 65534" in r.message, (
            r.message
        )
        assert not marker.exists(), "code planted in the workdir ran over ssh"
        k = await m.kill("a")
        assert not k.ok and "refused to signal anything" in k.message
        await m.refresh()
        assert "workdir not trusted" in (m.status("a").detail or "")
    finally:
        await _close([m], ts)


async def test_ssh_forged_pidfile_never_signals(ssh_env, sshd, tmp_path: Path) -> None:
    wd = tmp_path / "work"
    (m,), ts = await _ssh(wd, service_toml("f", free_port()))
    victim = _start_sleep()
    try:
        argv = ["sleep", "60"]
        rec = {"pid": victim.pid, "pgid": victim.pid, "starttime": starttime(victim.pid), "argv": argv,
               "argv_hash": argv_hash(argv), "port": 1, "started_at": 0}  # fmt: skip
        _write(wd / "run" / "f.json", json.dumps(rec))
        k = await m.kill("f", timeout=0.5)
        assert not k.ok and f"refused to signal pid {victim.pid}" in k.message, k.message
        await asyncio.sleep(0.3)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
        await _close([m], ts)


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True)
    p.write_text(text)


async def test_ssh_concurrent_launches_and_orphaned_group(ssh_env, sshd, tmp_path: Path) -> None:
    wd = tmp_path / "work"
    ms, ts = await _ssh(wd, service_toml("g", free_port(), env={"FAKE_CHILD": "1"}), n=3)
    set_smi = install_fake_smi(sshd)
    prof = ms[0].profile
    argv = build_launch(prof, prof.services[0]).argv
    try:
        results = await asyncio.gather(*(m.launch("g") for m in ms))
        oks = [r for r in results if r.ok]
        assert len(oks) == 1, [r.message for r in results]
        main = oks[0].status.pid
        assert (await ms[0].wait_state("g", {"ready"}, 20)).state == "ready"
        assert processes_running(argv) == [main]
        child = None
        for _ in range(100):
            await ms[1].refresh()
            child = next((p for p in ms[1].service_pids() if "time.sleep(600)" in " ".join(_cmd(p))), None)
            if child:
                break
            await asyncio.sleep(0.05)
        assert child is not None
        set_smi("load", apps_pid=child)  # the worker holds GPU memory, as SGLang's scheduler does
        os.kill(main, signal.SIGKILL)
        for _ in range(100):
            await ms[1].refresh()
            if (ms[1].status("g").detail or "").startswith("degraded"):
                break
            await asyncio.sleep(0.05)
        st = ms[1].status("g")
        assert st.state == "crashed" and "1 process still alive" in (st.detail or ""), st.detail
        assert "21482 MiB on GPU 0" in (st.detail or ""), st.detail
        k = await ms[2].kill("g", timeout=2)
        assert k.ok and "ended 1 process of its group" in k.message, k.message
        assert not alive(child)
    finally:
        await _close(ms, ts)
        cleanup_workdir(wd)

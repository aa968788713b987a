"""Remote sampling end to end through the real test sshd: the sampler program with a fake NVML, with a fake
nvidia-smi (fixture rows, -lms looping, the driver's failure texts on demand), the sh fallback without Python,
a silent sampler, cancel and a killed sshd — and no process left behind."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ddtree_tui.config import HostProfile, parse_profile
from ddtree_tui.telemetry import snapshot_once
from ddtree_tui.transport import make_transport
from ddtree_tui.transport.base import Transport
from tests.procs import leftovers, wait_no_leftovers
from tests.sshd import SshdServer, SshEnv
from tests.telemetry_run import Run

pytestmark = pytest.mark.sshd
FIX = Path(__file__).parent.parent / "fixtures"


def install_fake_smi(srv: SshdServer, mode: str = "load", **kw: object) -> Callable[..., None]:
    """The fake nvidia-smi in the server's bin dir; returns a setter for its mode."""
    dst = srv.bin_dir / "nvidia-smi"
    src = (FIX / "telemetry" / "fake_nvidia_smi.py").read_text()
    dst.write_text(f"#!{sys.executable}\n{src}")
    dst.chmod(0o755)

    def set_mode(mode: str, **extra: object) -> None:
        cfg = srv.bin_dir / "nvidia-smi.json"
        tmp = cfg.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fixtures": str(FIX / "gpu"), "mode": mode, **kw, **extra}))
        os.replace(tmp, cfg)

    set_mode(mode)
    return set_mode


@pytest.fixture
async def connect(ssh_env: SshEnv) -> AsyncIterator[Callable[..., object]]:
    transports: list[Transport] = []

    async def make(extra: str = "", alias: str = "testhost") -> tuple[Transport, HostProfile]:
        prof = parse_profile(ssh_env.profile_toml(alias, extra=extra))
        t = make_transport(prof)
        await t.start()
        assert await t.wait_connected(15), t.status
        transports.append(t)
        return t, prof

    yield make
    for t in transports:
        await t.close()


def fake_nvml_env(tmp_path: Path, **state: object) -> tuple[str, Path]:
    st = tmp_path / "nvml-state.json"
    st.write_text(json.dumps(state))
    fake = FIX / "telemetry" / "fake_nvml"
    return f'python = "{sys.executable}"\nenv = {{ PYTHONPATH = "{fake}", FAKE_NVML_STATE = "{st}" }}\n', st


async def test_remote_nvml_stream(connect, tmp_path: Path, sshd: SshdServer) -> None:
    extra, state = fake_nvml_env(tmp_path, pids={"0": [[os.getpid(), 1000]]})
    t, prof = await connect(extra)
    run = Run(t, prof)
    run.tel.set_service_pids({os.getppid(): "dflash"})  # our parent: matched through the ancestor chain
    try:
        host, gpus, status = await run.until(lambda u: len(u[1]) == 2, what="2 GPUs")
        assert status.source == "nvml" and status.fault is None and status.driver_version == "580.159.04"
        assert status.cuda_version == "13.0"  # NVML's 13000, as nvidia-smi's header prints it
        g0 = gpus[0]
        assert (g0.util_gpu, g0.mem_used_mb, g0.power_w, g0.temp_c) == (100, 21491, 691.29, 57)
        assert g0.processes[0].pid == os.getpid() and g0.service == "dflash"
        assert host is not None and host.mem_total_mb and host.disk_free_mb
        # a GPU falls off the bus: that GPU is a fault, the other keeps reporting
        state.write_text(json.dumps({"lost": [1]}))
        _, gpus, status = await run.until(
            lambda u: len(u[1]) == 2 and u[1][1].health == "fault", what="GPU lost"
        )
        assert gpus[1].fault == "GPU is lost" and gpus[1].fault_at and gpus[0].health == "ok"
        assert status.fault is None and run.tel.restarts == 0
        assert len(run.tel.history.series(0, "util_gpu")) >= 2
    finally:
        await run.stop()
    assert await wait_no_leftovers(tmp_path) == []


async def test_remote_nvidia_smi_stream_and_faults(connect, tmp_path: Path, sshd: SshdServer) -> None:
    set_mode = install_fake_smi(sshd)
    t, prof = await connect('python = "python3"\n[telemetry]\nsource = "nvidia-smi"\n')
    run = Run(t, prof)
    try:
        _, gpus, status = await run.until(lambda u: len(u[1]) == 2 and u[1][0].util_gpu == 100, what="rows")
        assert status.source == "nvidia-smi" and status.driver_version == "580.159.04"
        assert status.cuda_version == "13.0"  # from the real H200 nvidia-smi header the fake prints
        g0 = gpus[0]
        assert (g0.mem_used_mb, g0.power_w, g0.sm_clock_mhz, g0.throttle_reasons) == (
            21491,
            691.29,
            1485,
            ["sw_power_cap"],
        )
        assert g0.processes[0].pid == 567 and g0.processes[0].used_memory_mb == 21482
        set_mode("lost")
        _, gpus, _ = await run.until(lambda u: len(u[1]) == 2 and u[1][1].health == "fault", what="lost")
        assert gpus[1].fault == "GPU is lost" and gpus[1].uuid == "GPU-44f393d0-11d7-63e7-90fc-6f04b5c785e9"
        set_mode("handle")
        msg = "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error"
        _, gpus, _ = await run.until(lambda u: len(u[1]) == 2 and u[1][1].fault == msg, what="handle error")
        assert gpus[1].health == "fault" and gpus[1].index == 1 and gpus[0].health == "ok"
        set_mode("nodevices")
        _, gpus, status = await run.until(lambda u: u[2].fault == "No devices were found", what="no devices")
        assert status.fault_at and all(g.health == "fault" for g in gpus), [
            (g.index, g.health, g.fault) for g in gpus
        ]
        set_mode("nodriver")
        _, _, status = await run.until(
            lambda u: (u[2].fault or "").startswith("NVIDIA-SMI has failed"), what="driver"
        )
        set_mode("load")
        _, gpus, status = await run.until(
            lambda u: u[2].fault is None and len(u[1]) == 2 and u[1][1].health == "ok", what="recovery"
        )
        set_mode("hang")
        await run.until(lambda u: u[2].fault == "nvidia-smi stopped answering", timeout=20, what="smi hang")
        assert run.tel.restarts == 0  # the program stayed up; it restarted nvidia-smi itself
    finally:
        await run.stop()
    assert await wait_no_leftovers(tmp_path) == []


async def test_no_python_uses_sh_fallback(connect, tmp_path: Path, sshd: SshdServer) -> None:
    install_fake_smi(sshd)
    t, prof = await connect('python = "/nonexistent/python3"\n')
    run = Run(t, prof)
    try:
        _, gpus, status = await run.until(lambda u: len(u[1]) == 2, what="sh fallback rows")
        assert status.source == "nvidia-smi-oneshot" and gpus[0].power_w == 691.29
        assert gpus[0].processes[0].pid == 567
        _, _, _ = await run.until(lambda u: u[0] is not None and u[0].cpu_percent is not None, what="cpu")
        assert run.tel.mode_used == "shell"
    finally:
        await run.stop()
    assert await wait_no_leftovers(tmp_path) == []
    host, gpus, status = await snapshot_once(t, prof, timeout=15)
    assert status.source == "nvidia-smi-oneshot" and len(gpus) == 2 and host and host.mem_total_mb


async def test_silent_sampler_is_a_fault_and_restarts(connect, tmp_path: Path, sshd: SshdServer) -> None:
    hang = sshd.bin_dir / "python-hang"
    hang.write_text("#!/bin/sh\nexec sleep 300\n")
    hang.chmod(0o755)
    t, prof = await connect(f'python = "{hang}"\n')
    run = Run(t, prof, startup_grace=0.5)
    try:
        _, _, status = await run.until(
            lambda u: (u[2].fault or "").startswith("sampler not answering"), what="stall"
        )
        assert status.fault_at
        await run.until(lambda u: run.tel.restarts >= 2, what="restarts")
    finally:
        await run.stop()
    assert await wait_no_leftovers(tmp_path) == []


async def test_no_gpu_remote_and_snapshot(connect, tmp_path: Path, sshd: SshdServer) -> None:
    t, prof = await connect(f'python = "{sys.executable}"\n')  # real pynvml, no driver, no nvidia-smi
    host, gpus, status = await snapshot_once(t, prof, timeout=15)
    assert status.source == "none" and status.note == "no NVIDIA GPU" and gpus == []
    assert host is not None and host.mem_total_mb and host.uptime_s
    extra, _ = fake_nvml_env(tmp_path)
    t2, prof2 = await connect(extra)
    host, gpus, status = await snapshot_once(t2, prof2, timeout=15)
    assert status.source == "nvml" and [g.mem_used_mb for g in gpus] == [21491, 4]


async def test_sshd_killed_leaves_nothing_and_recovers(connect, tmp_path: Path, sshd: SshdServer) -> None:
    set_mode = install_fake_smi(sshd)
    set_mode("load")
    t, prof = await connect('python = "python3"\n[telemetry]\nsource = "nvidia-smi"\n')
    run = Run(t, prof)
    try:
        await run.until(lambda u: len(u[1]) == 2, what="rows")
        assert len(leftovers(tmp_path)) >= 2  # the sampler and its nvidia-smi -lms are running
        sshd.stop()
        _, gpus, status = await run.until(lambda u: u[2].fault is not None, what="fault after sshd death")
        assert all(g.health == "fault" for g in gpus) and status.fault_at
        assert await wait_no_leftovers(tmp_path) == []
        sshd.start()
        await run.until(lambda u: u[2].fault is None and len(u[1]) == 2, timeout=40, what="recovery")
    finally:
        await run.stop()
    assert await wait_no_leftovers(tmp_path) == []


def test_status_waits_for_gpu_rows_when_the_first_line_is_stale(
    ssh_env: SshEnv, sshd: SshdServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20 item 8: a host whose Python has no NVML bindings samples through `nvidia-smi -lms`, whose
    first rows come after a while; the sampler's first line is `stale` with no GPUs. `status` must wait for
    the GPU rows (within --timeout), not report `"gpus": []` at once."""
    from ddtree_tui.cli import main

    install_fake_smi(sshd, startup_delay=2.5)
    pf = tmp_path / "testhost.toml"
    pf.write_text(ssh_env.profile_toml("testhost", extra=f'python = "{sys.executable}"\n'))
    assert main(["status", "--json", "--profile", str(pf), "--timeout", "20"]) == 0
    snap = json.loads(capsys.readouterr().out)
    host = snap["hosts"][0]
    assert host["state"] == "connected"
    assert host["telemetry"]["source"] == "nvidia-smi", host["telemetry"]
    assert len(host["gpus"]) >= 1, host
    # and when no rows come within the timeout, the snapshot says so instead of showing nothing silently
    install_fake_smi(sshd, startup_delay=30)
    assert main(["status", "--json", "--profile", str(pf), "--timeout", "2"]) == 0
    host = json.loads(capsys.readouterr().out)["hosts"][0]
    assert host["gpus"] == [] and "no GPU sample within the 2 s timeout" in (host["telemetry"]["note"] or "")

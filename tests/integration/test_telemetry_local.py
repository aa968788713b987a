"""The sampler program through LocalTransport (real child processes): nvidia-smi streaming with the fake
nvidia-smi on PATH, a fault and recovery, and nothing left running after cancel."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.telemetry import snapshot_once
from ddtree_tui.transport.local import LocalTransport
from tests.procs import leftovers, wait_no_leftovers
from tests.telemetry_run import Run

FIX = Path(__file__).parent.parent / "fixtures"


async def test_local_nvidia_smi_stream_fault_and_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\n" + (FIX / "telemetry" / "fake_nvidia_smi.py").read_text())
    smi.chmod(0o755)
    cfg = bin_dir / "nvidia-smi.json"

    def set_mode(mode: str) -> None:
        tmp = cfg.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fixtures": str(FIX / "gpu"), "mode": mode}))
        os.replace(tmp, cfg)

    set_mode("load")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    prof = parse_profile(
        f'name = "me"\naddress = "local"\nworkdir = "{tmp_path}/w"\npython = "{sys.executable}"\n'
        '[telemetry]\nsource = "nvidia-smi"\n'
    )
    _, gpus, status = await snapshot_once(LocalTransport(prof), prof, timeout=15)
    assert status.source == "nvidia-smi-oneshot" and [g.power_w for g in gpus] == [691.29, 76.55]
    transport = LocalTransport(prof)
    await transport.start()
    run = Run(transport, prof, backoff_initial=1.0, startup_grace=10.0)  # HostTelemetry's own defaults
    try:
        _, gpus, status = await run.until(lambda u: len(u[1]) == 2, what="rows")
        assert status.source == "nvidia-smi" and gpus[0].util_gpu == 100 and gpus[0].processes[0].pid == 567
        set_mode("nodriver")
        _, _, status = await run.until(
            lambda u: (u[2].fault or "").startswith("NVIDIA-SMI has failed"), what="fault"
        )
        set_mode("idle")
        _, gpus, status = await run.until(
            lambda u: u[2].fault is None and len(u[1]) == 2 and u[1][0].util_gpu == 0, what="idle"
        )
        assert gpus[0].power_w == 79.39 and gpus[0].processes == []
        assert leftovers(tmp_path)  # the program and nvidia-smi -lms are running now
    finally:
        await run.stop()
    assert await wait_no_leftovers(tmp_path, timeout=5) == []

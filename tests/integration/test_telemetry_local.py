"""The sampler program through LocalTransport (real child processes): nvidia-smi streaming with the fake
nvidia-smi on PATH, a fault and recovery, and nothing left running after cancel."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.telemetry import HostTelemetry, snapshot_once
from ddtree_tui.transport.local import LocalTransport
from tests import util

FIX = Path(__file__).parent.parent / "fixtures"


def leftovers(root: Path) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if str(root) in cmd and ") Z " not in stat:
            out.append(f"{pid}: {cmd[:120]}")
    return out


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
    updates: list = []
    transport = LocalTransport(prof)
    await transport.start()
    tel = HostTelemetry(
        transport, prof, on_update=lambda *a: updates.append(a), interval=0.2, backoff_max=1.0
    )
    task = asyncio.create_task(tel.run())

    async def until(pred, what: str, timeout: float = 15.0):  # type: ignore[no-untyped-def]
        return await util.until(
            lambda: next((u for u in reversed(updates[-5:]) if pred(u)), None),
            timeout,
            what,
            detail=lambda: updates[-1:],
        )

    try:
        _, gpus, status = await until(lambda u: len(u[1]) == 2, "rows")
        assert status.source == "nvidia-smi" and gpus[0].util_gpu == 100 and gpus[0].processes[0].pid == 567
        set_mode("nodriver")
        _, _, status = await until(lambda u: (u[2].fault or "").startswith("NVIDIA-SMI has failed"), "fault")
        set_mode("idle")
        _, gpus, status = await until(
            lambda u: u[2].fault is None and len(u[1]) == 2 and u[1][0].util_gpu == 0, "idle"
        )
        assert gpus[0].power_w == 79.39 and gpus[0].processes == []
        assert leftovers(tmp_path)  # the program and nvidia-smi -lms are running now
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    deadline = time.monotonic() + 5
    while leftovers(tmp_path) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert leftovers(tmp_path) == []

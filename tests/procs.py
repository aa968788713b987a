"""Asking whether a process is still there, without racing its exit, which of ours are left behind, and ending
a child we started."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil


def alive(p: psutil.Process | int) -> bool:
    """True while the process exists and is not a zombie; a process that exits while we look is gone."""
    try:
        proc = p if isinstance(p, psutil.Process) else psutil.Process(p)
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def leftovers(root: Path) -> list[str]:
    """Live processes whose command line mentions this run's temp dir (wrappers, samplers), sshd aside.
    One copy: the scenario and the telemetry tests each had their own."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.pid == os.getpid() or p.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        argv = p.info.get("cmdline") or []
        cmd = " ".join(argv)
        if str(root) in cmd and "sshd" not in (argv[0] if argv else ""):
            out.append(f"{p.pid}: {cmd[:150]}")
    return out


async def wait_no_leftovers(root: Path, timeout: float = 8.0) -> list[str]:
    """What is still left after waiting up to `timeout` for everything mentioning `root` to go."""
    deadline = time.monotonic() + timeout
    while (left := leftovers(root)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return left


def stop_child(proc: subprocess.Popen[Any], grace: float = 10) -> int:
    """End a child this test started: SIGTERM, up to `grace` seconds, then SIGKILL; its exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode

"""Asking whether a process is still there, without racing its exit, which of ours are left behind, and ending
a child we started."""

from __future__ import annotations

import asyncio
import os
import random
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


def sleep_marker() -> str:
    """A sleep duration no other process on this machine uses, to find our (remote) process by its cmdline."""
    return f"{random.randint(100000, 999999)}.{random.randint(1, 9)}"


def procs_with(marker: str) -> list[psutil.Process]:
    """Every process (zombies too) with `marker` in its command line."""
    return [
        p for p in psutil.process_iter(["cmdline"]) if any(marker in a for a in p.info.get("cmdline") or [])
    ]


async def wait_gone(marker: str, timeout: float = 3.0) -> list[psutil.Process]:
    """The live processes with `marker` still there after waiting up to `timeout` for them to end."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in procs_with(marker) if alive(p)]) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


async def wait_present(marker: str, count: int = 1, timeout: float = 5.0, argv0: str | None = None) -> None:
    """Wait for `count` live processes with `marker` (whose program is `argv0`, where given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [
            p for p in procs_with(marker) if argv0 in (None, (p.info["cmdline"] or [""])[0]) and alive(p)
        ]
        if len(found) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{count} {argv0 or 'process'} {marker} never started")

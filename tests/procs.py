"""Asking whether a process is still there, without racing its exit, which of ours are left behind, and ending
a child we started; `SessionProcesses`, the whole run's check that nothing it started outlives it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import subprocess
import time
import uuid
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


# Every process a test run starts carries this variable (with the run's own token) in its environment.
SESSION_ENV = "DDTREE_TEST_SESSION"


class SessionProcesses:
    """What one test session (or one xdist worker) started that is still alive at its end.

    A process counts as the session's when it is a descendant of this process (simulators, sshd and its
    sessions, chromium, prometheus), when it inherited the session's token in its environment (a tmux server
    or anything else that daemonised away from its parent), or when its command line or working directory
    lies under the session's temp dir (a service launched over ssh, whose environment sshd rebuilt). Those
    alive before the session began are left out; nothing else on the machine is looked at twice.
    """

    def __init__(self, temp_root: Path) -> None:
        self.temp_root = str(temp_root)
        self.token = uuid.uuid4().hex
        os.environ[SESSION_ENV] = self.token
        self.me = os.getpid()
        self.before = {p.pid for p in self._candidates()}

    def _mine(self, p: psutil.Process) -> bool:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                return False
            argv = p.cmdline()
            if any(self.temp_root in a for a in argv):
                return True
            with contextlib.suppress(psutil.Error, OSError):
                if p.cwd().startswith(self.temp_root):
                    return True
            with contextlib.suppress(psutil.Error, OSError):
                if p.environ().get(SESSION_ENV) == self.token:
                    return True
        except (psutil.Error, OSError):
            return False
        return False

    def _candidates(self) -> list[psutil.Process]:
        try:
            me = psutil.Process(self.me)
            ancestors = {a.pid for a in me.parents()}
            tree = {c.pid: c for c in me.children(recursive=True)}
        except psutil.Error:
            ancestors, tree = set(), {}
        out = [c for c in tree.values() if alive(c)]
        for p in psutil.process_iter():
            if p.pid in tree or p.pid == self.me or p.pid in ancestors:
                continue
            if self._mine(p):
                out.append(p)
        return out

    def left(self) -> list[psutil.Process]:
        """The session's processes alive now that were not there when it began."""
        return [p for p in self._candidates() if p.pid not in self.before and alive(p)]

    def wait_left(self, timeout: float = 10.0) -> list[psutil.Process]:
        """What is still left after giving stragglers (a child exiting after its SIGTERM) up to `timeout`."""
        deadline = time.monotonic() + timeout
        while (left := self.left()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left


def describe(procs: list[psutil.Process]) -> str:
    lines = []
    for p in procs:
        try:
            lines.append(f"  pid {p.pid} (parent {p.ppid()}): {' '.join(p.cmdline())[:300]}")
        except psutil.Error:
            lines.append(f"  pid {p.pid}: (gone)")
    return "\n".join(lines)


def kill_all(procs: list[psutil.Process]) -> None:
    """SIGKILL processes this run started (found by SessionProcesses), and reap those that are our children."""
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=5)

"""A hold on a service (a sweep's), kept with the services it guards: the fleet checks it for every intent,
and the fleet sits below the sweep. The hold is visible to other ddtree-tui processes on this machine (the
TUI in another terminal, a headless `launch`/`kill`): one small JSON file per HOST/SVC in the user's state
directory naming the holder's pid and its start time. A hold whose process is gone (a SIGKILLed sweep) is stale and ignored;
a pid reused by another process does not match the recorded start time.

The in-process hold (ServiceManager.hold) is what the Fleet checks first; this file extends it across
processes. `DDTREE_TUI_HOLDS_DIR` moves the directory (tests)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path

import psutil

from ddtree_tui.lib import paths
from ddtree_tui.remote.atomicio import write_file


def holds_dir() -> Path:
    return paths.holds_dir()


def _path(ref: str) -> Path:
    return holds_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "+", ref) + ".json")


def _create_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def holder(ref: str) -> str | None:
    """Who holds `ref` from another live process (None: nobody, ourselves, or a stale file)."""
    p = _path(ref)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        pid, started = int(data["pid"]), float(data["create_time"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid():
        return None
    ct = _create_time(pid)
    if ct is None or abs(ct - started) > 1.0:
        return None  # stale: that process is gone (or the pid now belongs to another one)
    return f"{data.get('owner') or 'a sweep'} (pid {pid})"


def acquire(ref: str, owner: str) -> None:
    """Write our hold; ValueError naming the holder when another live process holds it."""
    other = holder(ref)
    if other is not None:
        raise ValueError(f"{ref} is held by {other}")
    body = {
        "pid": os.getpid(),
        "create_time": _create_time(os.getpid()),
        "owner": owner,
        "ref": ref,
        "since": time.time(),
    }
    p = _path(ref)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_file(p, json.dumps(body))


def release(ref: str) -> None:
    p = _path(ref)
    with contextlib.suppress(OSError, ValueError, KeyError):
        if int(json.loads(p.read_text(encoding="utf-8"))["pid"]) == os.getpid():
            p.unlink()

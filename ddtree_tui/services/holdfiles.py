"""A hold on a service (a sweep's), kept with the services it guards: the fleet checks it for every intent,
and the fleet sits below the sweep. The hold is visible to other ddtree-tui processes on this machine (the
TUI in another terminal, a headless `launch`/`kill`): one small JSON file per HOST/SVC in the user's state
directory naming the holder's pid and its start time. A hold whose process is gone (a SIGKILLed sweep) is stale and ignored;
a pid reused by another process does not match the recorded start time.

A hold is scoped to the place the service lives (`place`: the host's address, login and resolved workdir,
where its pidfile and log are): a sweep in another checkout whose profile has the same HOST/SVC name but
another workdir (the demo's relative `.ddtree/demo`) holds another service and does not block this one; a
holder in the same place still does. The place is part of the file's name and is kept in the file.

The in-process hold (ServiceManager.hold) is what the Fleet checks first; this file extends it across
processes. `DDTREE_TUI_HOLDS_DIR` moves the directory (tests)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from pathlib import Path

from ddtree_tui.config import HostProfile
from ddtree_tui.lib import paths
from ddtree_tui.remote.atomicio import write_file


class ServiceHeld(Exception):
    """The service is held by someone else (a running sweep)."""


def holds_dir() -> Path:
    return paths.holds_dir()


def place_of(profile: HostProfile) -> str:
    """Where a host's services live: two profiles with this same place drive the same pidfiles."""
    from ddtree_tui.services.launchline import workdir  # the launch code, loaded where a hold is placed

    if profile.is_local:
        return f"local:{workdir(profile)}"
    return f"{profile.user or ''}@{profile.address}:{profile.port or ''}:{workdir(profile)}"


def _path(ref: str, place: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]", "+", ref)
    if place:
        name += "@" + hashlib.sha256(place.encode()).hexdigest()[:16]
    return holds_dir() / (name + ".json")


def _create_time(pid: int) -> float | None:
    import psutil  # loaded where a holder is checked: a `--run-bench --url` process imports this module

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def holder(ref: str, place: str = "") -> str | None:
    """Who holds `ref` at `place` from another live process (None: nobody, ourselves, a stale file, or a
    hold of a service of the same name somewhere else)."""
    p = _path(ref, place)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        pid, started = int(data["pid"]), float(data["create_time"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if str(data.get("place") or "") != place:
        return None  # a name collision of the file's hash: another place's hold
    if pid == os.getpid():
        return None
    ct = _create_time(pid)
    if ct is None or abs(ct - started) > 1.0:
        return None  # stale: that process is gone (or the pid now belongs to another one)
    return f"{data.get('owner') or 'a sweep'} (pid {pid})"


def acquire(ref: str, owner: str, place: str = "") -> None:
    """Write our hold of `ref` at `place`; ValueError naming the holder when another live process holds it."""
    other = holder(ref, place)
    if other is not None:
        raise ValueError(f"{ref} is held by {other}")
    body = {
        "pid": os.getpid(),
        "create_time": _create_time(os.getpid()),
        "owner": owner,
        "ref": ref,
        "place": place,
        "since": time.time(),
    }
    p = _path(ref, place)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_file(p, json.dumps(body))


def release(ref: str, place: str = "") -> None:
    p = _path(ref, place)
    with contextlib.suppress(OSError, ValueError, KeyError):
        if int(json.loads(p.read_text(encoding="utf-8"))["pid"]) == os.getpid():
            p.unlink()

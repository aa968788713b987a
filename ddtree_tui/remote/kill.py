"""Stop one service's process group (TERM, then KILL after a grace period) if the pidfile is believed.

Sent as source with its helpers (`ddtree_tui.remote.source('kill')`); standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Dict, List, NoReturn, Tuple

from ddtree_tui.remote.hostlib import check_workdir, group_members, identify, read_json, rm

cfg = json.load(sys.stdin)


def out(obj: Dict[str, Any]) -> NoReturn:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.exit(0)


why = check_workdir(cfg, create=False)
if why is not None:
    out({"ok": False, "result": "untrusted", "why": why})
rec = read_json(cfg["pidfile"])
if rec is None:
    out({"ok": True, "result": "not-running"})
accept = set(cfg.get("accept") or [])
who, info = identify(rec, accept)
pid = rec.get("pid")
wrapper = int(rec.get("wrapper_pid") or 0)


def end_pids(pids: List[int], timeout: float) -> Tuple[str, List[int], List[int]]:
    # TERM each verified member, KILL what is left after the timeout; the pids that ended
    def live() -> List[int]:
        return [p for p in pids if p in set(group_members(rec))]

    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except OSError:
            pass
    t0 = time.time()
    how = "terminated"
    while live() and time.time() - t0 < timeout:
        time.sleep(0.05)
    if live():
        how = "killed"
        for p in live():
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        t1 = time.time()
        while live() and time.time() - t1 < 10:
            time.sleep(0.05)
    return how, [p for p in pids if p not in live()], live()


if who != "ours":
    left = group_members(rec, exclude=(pid, wrapper)) if who in ("dead", "pid-reused") else []
    if left:
        # the main process is gone but its workers (the scheduler, the detokenizer: GPU memory) run on
        open(cfg["stopping"], "a").close()
        t0 = time.time()
        how, ended, survivors = end_pids(left, cfg["timeout"])
        if not survivors:
            rm(cfg["pidfile"])
        rm(cfg["stopping"])
        out(
            {
                "ok": not survivors,
                "result": "group-ended" if not survivors else "survived",
                "how": how,
                "pid": pid,
                "ended": ended,
                "survivors": survivors,
                "exit": read_json(cfg["exitfile"]),
                "waited": round(time.time() - t0, 3),
            }
        )
    rm(cfg["pidfile"])
    rm(cfg["stopping"])
    if who == "dead":
        out({"ok": True, "result": "stale", "pid": pid, "exit": read_json(cfg["exitfile"])})
    out({"ok": False, "result": who, "pid": pid, "cmd": info})
open(cfg["stopping"], "a").close()
pgid = rec.get("pgid")
group = info["pgrp"] == pgid and pgid not in (None, 0, 1)
before = group_members(rec, exclude=(pid, wrapper)) if group else []


def send(sig: int) -> None:
    try:
        if group:
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def alive() -> bool:
    if group:
        return bool(group_members(rec))
    w, _ = identify(rec, accept)
    return w == "ours"


t0 = time.time()
send(signal.SIGTERM)
result = "terminated"
while alive():
    if time.time() - t0 > cfg["timeout"]:
        send(signal.SIGKILL)
        result = "killed"
        t1 = time.time()
        while alive() and time.time() - t1 < 10:
            time.sleep(0.05)
        break
    time.sleep(0.05)
gone = not alive()
if gone:
    rm(cfg["pidfile"])
rm(cfg["stopping"])
out(
    {
        "ok": gone,
        "result": result if gone else "survived",
        "pid": pid,
        "ended": before,
        "waited": round(time.time() - t0, 3),
    }
)

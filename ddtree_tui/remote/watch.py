"""Every service's process state: one JSON line per interval (or once); ends when stdout closes.

Sent as source with its helpers (`ddtree_tui.remote.source('watch')`); standard library only.
Request (stdin, JSON): {"interval": seconds, "services": [{name, workdir, pidfile, exitfile, stopping, log,
accept}, ...], "once": bool}. Reply: {"ts": ..., "services": {name: record}} a line (one line when once).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List

from ddtree_tui.remote.hostlib import (
    check_workdir,
    gpu_usage,
    group_members,
    groups,
    identify,
    proc_stat,
    read_json,
    tail,
)

# One JSON line per interval with every service's process state; ends when stdout closes (EPIPE).
cfg = json.load(sys.stdin)
interval = float(cfg.get("interval") or 2.0)
services = cfg.get("services") or []
once = bool(cfg.get("once"))


def one(svc: Dict[str, Any], grp: Dict[int, List[int]]) -> Dict[str, Any]:
    why = check_workdir(svc, create=False)
    if why is not None:
        return {"present": False, "untrusted": why}
    rec = read_json(svc["pidfile"])
    if rec is None:
        return {"present": False}
    who, st = identify(rec, set(svc.get("accept") or []))
    r = {
        "present": True,
        "pid": rec.get("pid"),
        "pgid": rec.get("pgid"),
        "started_at": rec.get("started_at"),
        "argv_hash": rec.get("argv_hash"),
        "port": rec.get("port"),
    }
    if who == "ours":
        r["alive"] = True
        r["pids"] = (
            sorted(set(grp.get(rec.get("pgid"), []) + [rec.get("pid")]))
            if st["pgrp"] == rec.get("pgid")
            else [rec.get("pid")]
        )
        r["last"] = tail(svc["log"], 1)
    else:
        r["alive"] = False
        r["why"] = who
        r["other_cmd"] = st if who != "dead" else None
        r["stopping"] = os.path.exists(svc["stopping"])
        r["exit"] = read_json(svc["exitfile"])
        wpid = int(rec.get("wrapper_pid") or 0)
        t_end = time.time() + 1.0
        # the service just died and its wrapper is writing the exit status: give it a moment
        while r["exit"] is None and wpid > 0 and time.time() < t_end:
            wst = proc_stat(wpid)
            if wst is None or wst["state"] == "Z":
                break
            time.sleep(0.02)
            r["exit"] = read_json(svc["exitfile"])
        r["tail"] = tail(svc["log"], 20)
        if who in ("dead", "pid-reused"):
            left = group_members(rec, exclude=(rec.get("pid"), wpid), grp=grp)
            if left:
                use = gpu_usage()
                r["orphans"] = left
                r["orphan_gpu"] = [g for p in left for g in use.get(p, [])]
    return r


while True:
    grp = groups()
    res = {}
    for svc in services:
        try:
            res[svc["name"]] = one(svc, grp)
        except Exception as e:
            res[svc["name"]] = {"present": False, "error": repr(e)}
    try:
        sys.stdout.write(json.dumps({"ts": time.time(), "services": res}) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        sys.exit(0)
    if once:
        break
    time.sleep(interval)

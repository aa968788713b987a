"""Helpers shared by the service programs (wrapper, launch, kill, watch, read_log): pidfiles, /proc, groups.

Files in the workdir: `logs/<svc>.log` (previous run kept as `.log.1`), `run/<svc>.json` (the pidfile:
pid, pgid, wrapper_pid, starttime, argv with secrets masked, argv_hash of the real argv, port, started_at),
`run/<svc>.exit` (written by the wrapper when the service exits: exit_code or signal), `run/<svc>.stopping`
(present while we are killing it), `run/<svc>.lock` (flock held by a launch from check to pidfile).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ddtree_tui.remote.atomicio import write_file
from ddtree_tui.remote.trust import UID, secure_dir

WRAPPER_MARK = "ddtree-tui " + "service wrapper"  # the literal text appears only in the wrapper's source


def argv_hash(argv: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(argv)).encode()).hexdigest()[:16]


def proc_stat(pid: int) -> Optional[Dict[str, Any]]:
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    rest = data[data.rfind(")") + 2 :].split()
    return {
        "state": rest[0],
        "ppid": int(rest[1]),
        "pgrp": int(rest[2]),
        "sid": int(rest[3]),
        "starttime": int(rest[19]),
    }


def proc_uid(pid: int) -> Optional[int]:
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return None


def proc_cmdline(pid: int) -> Optional[List[str]]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]]


def check_workdir(cfg: Dict[str, Any], create: bool) -> Optional[str]:
    dirs = [cfg["workdir"], os.path.dirname(cfg["pidfile"])]
    if cfg.get("log"):
        dirs.append(os.path.dirname(cfg["log"]))
    for d in dirs:
        why = secure_dir(d, create)
        if why is not None:
            return why
    return None


def read_json(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path: str, obj: Any) -> None:
    write_file(path, json.dumps(obj), mode=0o600)


def rm(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def is_our_wrapper(pid: int, rec: Dict[str, Any]) -> bool:
    if not pid or pid != rec.get("wrapper_pid") or proc_uid(pid) != UID:
        return False
    st = proc_stat(pid)
    cmd = proc_cmdline(pid) or []
    return bool(st and st["state"] != "Z" and st["sid"] == pid and cmd and WRAPPER_MARK in cmd[-1])


def identify(rec: Dict[str, Any], accept: Set[str]) -> Tuple[str, Any]:
    # 'ours' when the pid still runs an argv we accept for the spec, with our start time and our uid; else why not
    pid = int(rec.get("pid") or 0)
    st = proc_stat(pid) if pid > 0 else None
    if st is None or st["state"] == "Z":
        return "dead", None
    cmd = proc_cmdline(pid) or []
    if not cmd:  # exiting between the two reads (a zombie's cmdline is empty): ours, gone, not another's
        st2 = proc_stat(pid)
        if st2 is None or st2["state"] == "Z" or st2["starttime"] == rec.get("starttime"):
            return "dead", None
    if st["starttime"] != rec.get("starttime"):
        return "pid-reused", " ".join(cmd)[:200]
    if proc_uid(pid) != UID:
        return "foreign", " ".join(cmd)[:200]
    h = argv_hash(cmd)
    if h in accept:
        return "ours", st
    if h == rec.get("argv_hash") and is_our_wrapper(st["ppid"], rec):
        return "ours", st  # launched by our wrapper from an older spec: still ours
    return "foreign", " ".join(cmd)[:200]


def group_members(
    rec: Dict[str, Any], exclude: Iterable[Any] = (), grp: Optional[Dict[int, List[int]]] = None
) -> List[int]:
    # live processes of the service's process group and session (the wrapper made both): our uid only.
    # A pgid is never handed out again while any process still uses it, so these are the service's own.
    # `grp` (from groups()) saves a scan of /proc when the caller already made one.
    pgid = int(rec.get("pgid") or 0)
    if pgid <= 1:
        return []
    out = []
    cands = grp.get(pgid, []) if grp is not None else [int(d) for d in os.listdir("/proc") if d.isdigit()]
    for pid in cands:
        if pid in exclude:
            continue
        st = proc_stat(pid)
        if (
            st is not None
            and st["state"] != "Z"
            and st["pgrp"] == pgid
            and st["sid"] == pgid
            and proc_uid(pid) == UID
        ):
            out.append(pid)
    return sorted(out)


def groups() -> Dict[int, List[int]]:
    out = {}  # type: Dict[int, List[int]]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = proc_stat(int(d))
        if st is not None and st["state"] != "Z":
            out.setdefault(st["pgrp"], []).append(int(d))
    return out


_GPU_CACHE = {"at": 0.0, "data": {}}  # type: Dict[str, Any]


def gpu_usage() -> Dict[int, List[List[Any]]]:
    # pid -> [[gpu index, MiB], ...] from nvidia-smi, at most every 10 s; {} without nvidia-smi
    if time.time() - _GPU_CACHE["at"] < 10:
        cached = _GPU_CACHE["data"]  # type: Dict[int, List[List[Any]]]
        return cached
    data = {}  # type: Dict[int, List[List[Any]]]
    try:
        import subprocess

        q = ["nvidia-smi", "--format=csv,noheader,nounits"]
        gpus = subprocess.run(q + ["--query-gpu=index,pci.bus_id"], capture_output=True, text=True, timeout=5)
        apps = subprocess.run(
            q + ["--query-compute-apps=pid,used_memory,gpu_bus_id"], capture_output=True, text=True, timeout=5
        )
        index = {}  # type: Dict[str, int]
        for line in gpus.stdout.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) >= 2 and parts[0].isdigit():
                index[parts[1].lower()] = int(parts[0])
        for line in apps.stdout.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
                data.setdefault(int(parts[0]), []).append([index.get(parts[2].lower()), int(parts[1])])
    except Exception:
        data = {}
    _GPU_CACHE["at"], _GPU_CACHE["data"] = time.time(), data
    return data


def tail(path: str, n: int) -> List[str]:
    window = max(16384, n * 512)
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - window))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    lines = [l.rstrip("\r") for l in data.split("\n")]
    if size > window:
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines.pop()
    return lines[-n:]


def free_mb(path: str) -> Optional[int]:
    try:
        v = os.statvfs(path)
        return v.f_bavail * v.f_frsize // (1024 * 1024)
    except OSError:
        return None

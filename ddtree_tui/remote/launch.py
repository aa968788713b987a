"""Launch one service: trust and port checks under the workdir's flock, start the wrapper, wait for its pidfile.

Sent as source with its helpers (`ddtree_tui.remote.source('launch')`); standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, NoReturn, Optional

from ddtree_tui.remote.hostlib import (
    check_workdir,
    free_mb,
    group_members,
    identify,
    proc_cmdline,
    read_json,
    rm,
    tail,
)
from ddtree_tui.remote.ports import bind_error, port_holder_pid

cfg = json.load(sys.stdin)


def out(obj: Dict[str, Any]) -> NoReturn:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    os._exit(0)


def port_free(bind: str, port: int) -> bool:
    return bind_error(bind, port) is None


def port_holder(port: int) -> Optional[Dict[str, Any]]:
    """None when nothing listens on `port`; else who holds it (pid and cmd None when we may not see it)."""
    listening, pid = port_holder_pid(port)
    if not listening:
        return None
    if pid is None:
        return {"pid": None, "cmd": None}
    return {"pid": pid, "cmd": " ".join(proc_cmdline(pid) or [])[:200]}


why = check_workdir(cfg, create=True)
if why is not None:
    out({"ok": False, "reason": "workdir", "why": why})
# one launch of a service at a time on this host: the check-then-spawn below runs under this lock, held
# until the pidfile is written (a second launch then finds the service running)
import fcntl

lock_fd = os.open(cfg["lockfile"], os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
lock_deadline = time.time() + float(cfg.get("lock_timeout", 60))
while True:
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except BlockingIOError:
        if time.time() > lock_deadline:
            out({"ok": False, "reason": "busy"})
        time.sleep(0.05)
accept = set(cfg["accept"])
stale = None
rec = read_json(cfg["pidfile"])
if rec is not None:
    who, st = identify(rec, accept)
    if who == "ours":
        out({"ok": False, "reason": "running", "pid": rec.get("pid"), "started_at": rec.get("started_at")})
    left = group_members(rec, exclude=(rec.get("pid"),)) if who in ("dead", "pid-reused") else []
    if left:
        out({"ok": False, "reason": "degraded", "pid": rec.get("pid"), "pids": left})
    stale = {"pid": rec.get("pid"), "why": who}
    rm(cfg["pidfile"])
bind = cfg["bind"] or "0.0.0.0"
if not port_free(bind, cfg["port"]):
    nxt = None
    for p in range(cfg["port"] + 1, min(cfg["port"] + 500, 65536)):
        if p not in cfg["avoid_ports"] and port_free(bind, p):
            nxt = p
            break
    out(
        {
            "ok": False,
            "reason": "port",
            "port": cfg["port"],
            "holder": port_holder(cfg["port"]),
            "next_free": nxt,
        }
    )
space = free_mb(cfg["workdir"])
if space is not None and space < 1:
    out(
        {
            "ok": False,
            "reason": "space",
            "why": "no space left on the device of %s (%d MiB free)" % (cfg["workdir"], space),
        }
    )
if os.path.exists(cfg["log"]):
    os.replace(cfg["log"], cfg["log"] + ".1")
rm(cfg["exitfile"])
rm(cfg["stopping"])
env = dict(os.environ)
env.update(cfg["env"])
env.setdefault("PYTHONSAFEPATH", "1")  # Python >= 3.11: the service's cwd (the workdir) is not on sys.path
import subprocess

logf = open(cfg["log"], "ab")
os.chmod(cfg["log"], 0o600)
wcfg = {k: cfg[k] for k in ("argv", "display_argv", "pidfile", "exitfile", "port", "name", "log")}
w = subprocess.Popen(
    [sys.executable, "-I", "-c", cfg["wrapper"]],
    stdin=subprocess.PIPE,
    stdout=logf,
    stderr=subprocess.STDOUT,
    cwd=cfg["cwd"],
    env=env,
    start_new_session=True,
    close_fds=True,
)
try:
    if w.stdin is not None:  # always: stdin=PIPE
        w.stdin.write(json.dumps(wcfg).encode())
        w.stdin.close()
except OSError:
    pass


def space_note() -> str:
    mb = free_mb(cfg["workdir"])
    return (" (%d MiB free on the workdir's disk)" % mb) if mb is not None and mb < 64 else ""


deadline = time.time() + 15
while time.time() < deadline:
    rec = read_json(cfg["pidfile"])
    if rec is not None:
        out({"ok": True, "record": rec, "stale": stale})
    ex = read_json(cfg["exitfile"])
    if ex is not None:
        out({"ok": False, "reason": "exec", "exit": ex, "tail": tail(cfg["log"], 20)})
    if w.poll() is not None and read_json(cfg["pidfile"]) is None:
        out(
            {
                "ok": False,
                "reason": "exec",
                "exit": {
                    "exit_code": w.returncode,
                    "error": "the wrapper exited with status %d before writing its pidfile%s"
                    % (w.returncode, space_note()),
                },
                "tail": tail(cfg["log"], 20),
            }
        )
    time.sleep(0.02)
out({"ok": False, "reason": "timeout", "tail": tail(cfg["log"], 20)})

"""The service wrapper: session leader of the service's process group (started by `launch`).

Sent as source with its helpers (`ddtree_tui.remote.source('wrapper')`); standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, NoReturn

from ddtree_tui.remote.hostlib import argv_hash, proc_stat, write_json

# ddtree-tui service wrapper
# Session leader of the service's process group: starts the service, writes the pidfile, waits, records the
# exit status. Its configuration comes on stdin (never argv: `ps` would show the service's secrets).
# A TERM to the group ends the service; this wrapper only notes it and writes the exit file.
cfg = json.loads(sys.stdin.read())


def _note(signum: int, frame: Any) -> None:
    pass


for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, _note)


def word(a: str) -> str:
    plain = a and a.isprintable() and not any(c in a for c in " '\"\\$`")
    return a if plain else json.dumps(a)  # a newline in an argument can never forge a log line


def say(msg: str) -> None:
    try:
        sys.stdout.write("[ddtree-tui] %s %s\n" % (time.strftime("%Y-%m-%d %H:%M:%S"), msg))
        sys.stdout.flush()
    except OSError:
        pass


say("launching %s: %s" % (cfg["name"], " ".join(word(a) for a in cfg["display_argv"])))


def fail(code: int, why: str) -> NoReturn:
    try:
        write_json(
            cfg["exitfile"], {"exit_code": code, "signal": None, "error": why, "ended_at": time.time()}
        )
    except OSError:
        pass
    say("cannot start %s: %s" % (cfg["name"], why))
    sys.exit(code)


try:
    import subprocess

    p = subprocess.Popen(cfg["argv"], stdin=subprocess.DEVNULL)
except OSError as e:
    fail(127, str(e))
st = proc_stat(p.pid) or {}
rec = {
    "pid": p.pid,
    "pgid": os.getpgid(0),
    "wrapper_pid": os.getpid(),
    "starttime": st.get("starttime"),
    "argv": cfg["display_argv"],
    "argv_hash": argv_hash(cfg["argv"]),
    "port": cfg["port"],
    "name": cfg["name"],
    "started_at": time.time(),
    "log": cfg["log"],
}
try:
    write_json(cfg["pidfile"], rec)
except OSError as e:
    # an untracked service is worse than none: end it
    try:
        p.kill()
    except OSError:
        pass
    p.wait()
    fail(1, "cannot write the pidfile %s: %s" % (cfg["pidfile"], e.strerror or e))
rc = p.wait()
info = {
    "pid": p.pid,
    "exit_code": rc if rc >= 0 else None,
    "signal": -rc if rc < 0 else None,
    "ended_at": time.time(),
}
try:
    write_json(cfg["exitfile"], info)
except OSError as e:
    say("cannot write the exit status %s: %s" % (cfg["exitfile"], e.strerror or e))
say("%s exited: %s" % (cfg["name"], ("status %d" % rc) if rc >= 0 else ("signal %d" % -rc)))

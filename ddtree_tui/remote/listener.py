"""Who listens on a service's port, and is it the service we launched (issue 29: target identity).

Before anything measures a service, this says whether the port's listening sockets are all held by the
process group of the pidfile's process, and whether that process is ours (start time, uid, argv: the same
belief kill.py has). A stopped service whose port something else holds is `foreign`, never measured under the
service's name.

Sent as source with its helpers (`ddtree_tui.remote.source('listener')`); standard library only.
Request (stdin, JSON): the service's files (workdir, pidfile, ...), `accept` (argv hashes) and `port` (the
profile's; the pidfile's wins while our process runs). Reply: {"result": ours / stopped / foreign /
no-listener / untrusted, "port", "pid", "holders", "program", "why"}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, NoReturn, Set

from ddtree_tui.remote.hostlib import check_workdir, group_members, identify, proc_cmdline, read_json
from ddtree_tui.remote.ports import listening_inodes, socket_holders

cfg = json.load(sys.stdin)


def out(obj: Dict[str, Any]) -> NoReturn:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.exit(0)


def holders(inodes: Set[str]) -> List[int]:
    # every process we may see that holds one of the listening sockets
    return socket_holders(inodes)


def program(pid: int) -> Any:
    # the program's name only: a foreign command line may carry secrets
    cmd = proc_cmdline(pid) or []
    return os.path.basename(cmd[0])[:64] if cmd else None


why = check_workdir(cfg, create=False)
found = read_json(cfg["pidfile"]) if why is None else None
rec = found if isinstance(found, dict) else {}  # type: Dict[str, Any]
who = "absent"
if rec:
    who, _info = identify(rec, set(cfg.get("accept") or []))
port = int(cfg.get("port") or 0)
if who == "ours" and isinstance(rec.get("port"), int) and rec["port"] > 0:
    port = rec["port"]  # a profile edited since the launch: the process still serves on its own port
inodes = listening_inodes(port)
seen = holders(inodes) if inodes else []
reply = {"port": port, "pid": rec.get("pid"), "holders": seen, "service": who}
if why is not None and not inodes:
    out(dict(reply, result="untrusted", why=why))
if not inodes:
    out(dict(reply, result="no-listener" if who == "ours" else "stopped"))
ours = set(group_members(rec)) | {int(rec.get("pid") or 0)} if who == "ours" else set()  # type: Set[int]
# every listening socket must be held by our group (and seen: ours are our uid, so we may see them)
if ours and all(h and h <= ours for h in (set(holders({i})) for i in inodes)):
    out(dict(reply, result="ours"))
strangers = [p for p in seen if p not in ours]
out(dict(reply, result="foreign", program=program(strangers[0]) if strangers else None, why=why))

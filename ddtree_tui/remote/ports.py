"""Who listens on a TCP port: the one lookup of the launcher (a refused port names its holder) and the doctor's
probe (a busy port in the report). Both had their own copy of the /proc scan.

Runs on the host with Python >= 3.6 and the standard library only: the probe runs on old Pythons, so no
`from __future__ import annotations` here (hostlib.py and atomicio.py have it, which is why this is not in
hostlib.py).
"""

import os
import socket
from typing import List, Optional, Set, Tuple


def bind_error(bind: str, port: int) -> Optional[str]:
    """None when `port` can be bound on `bind` now; else the OS's reason (e.g. "Address already in use")."""
    s = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((bind, port))
        return None
    except OSError as e:
        return e.strerror or str(e)
    finally:
        s.close()


def listening_inodes(port: int) -> Set[str]:
    """The inode numbers of the sockets listening on `port` (IPv4 and IPv6), from /proc/net/tcp{,6}."""
    inodes: Set[str] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f, None)  # the header
                for line in f:
                    parts = line.split()
                    try:
                        if (
                            len(parts) > 9
                            and parts[3] == "0A"
                            and int(parts[1].rsplit(":", 1)[1], 16) == port
                        ):
                            inodes.add(parts[9])
                    except (IndexError, ValueError):
                        continue
        except OSError:
            pass
    return inodes


def socket_holders(inodes: Set[str], first: bool = False) -> List[int]:
    """The pids (that we may see) holding one of the sockets `inodes`; only the first found with `first`."""
    links = set("socket:[%s]" % i for i in inodes)
    found = []  # type: List[int]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % d)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (d, fd)) in links:
                    found.append(int(d))
                    break
            except OSError:
                pass
        if first and found:
            break
    return sorted(found)


def port_holder_pid(port: int) -> Tuple[bool, Optional[int]]:
    """(whether something listens on `port`, the pid of a process holding that socket if we may see it)."""
    inodes = listening_inodes(port)
    if not inodes:
        return False, None
    pids = socket_holders(inodes, first=True)
    return True, (pids[0] if pids else None)

"""What many tests need: free loopback ports and a bounded wait. One copy (they were written six times).

`free_port` is the package's own (ddtree_tui/sim/process.py), so tests and the demo pick ports the same way.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ddtree_tui.sim.process import free_port

__all__ = ["free_port", "free_ports", "port_free", "until"]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, avoid: set[int] | None = None) -> list[int]:
    """n distinct free high ports, each with its next neighbour free too (a refused port's suggestion)."""
    out: list[int] = []
    avoid = set(avoid or ())
    socks: list[socket.socket] = []
    try:
        while len(out) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            p = s.getsockname()[1]
            if p in avoid or p + 1 in avoid or p >= 65000 or not port_free(p + 1):
                continue
            out.append(p)
            avoid.update((p, p + 1))
    finally:
        for s in socks:
            s.close()
    return out


async def until(
    cond: Callable[[], Any],
    timeout: float,
    what: str,
    tick: float = 0.05,
    detail: Callable[[], Any] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> Any:
    """Poll cond() until it returns something truthy (and return that); AssertionError naming `what` (and
    `detail()`) after the timeout. `sleep`: how to wait between polls (a Textual pilot's pause repaints)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            extra = f"; {detail()}" if detail else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        await sleep(tick)

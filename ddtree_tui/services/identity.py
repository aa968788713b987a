"""Is the listener on a launched service's port the service we launched? One call of the host program
`remote/listener.py` (the port's listening sockets against the pidfile's process group, believed as kill
believes it), read into the `TargetIdentity` every run records (model/identity.py).

Only for services ddtree-tui launches; an external service or a `--url` server is identified by what its
own /server_info says (fleet/identity.py).
"""

from __future__ import annotations

import time
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.model.identity import TargetIdentity
from ddtree_tui.remote import source
from ddtree_tui.services.hostcall import HostCalls
from ddtree_tui.services.status import running_port
from ddtree_tui.services.svcstate import SvcState
from ddtree_tui.transport.base import TransportError

LISTENER = source("listener")
TIMEOUT = 15.0


class ListenerReply(BaseModel):
    """remote/listener.py's answer."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    PROGRAM: ClassVar[str] = "remote/listener.py"

    result: str  # ours / stopped / foreign / no-listener / untrusted
    port: int | None = None
    pid: int | None = None  # the pidfile's process
    holders: list[int] = Field(default_factory=list)
    program: str | None = None  # a foreign holder's program name
    service: str | None = None  # what the pidfile's process is: ours / dead / pid-reused / foreign / absent
    why: str | None = None


def _state_words(service: str | None) -> str:
    return {
        "dead": "is not running (its process ended)",
        "pid-reused": "is not running (its pid was reused)",
        "foreign": "is not running (its pid runs a command we did not start)",
        "absent": "is not running",
    }.get(service or "absent", "is not running")


def identity_of(ref: str, r: ListenerReply) -> TargetIdentity:
    """The reply as the identity a run records, with the reason in words when it is not the service."""
    port = r.port
    held = f"pid {', '.join(map(str, r.holders))}" if r.holders else "a process we cannot see"
    if r.program:
        held += f" ({r.program})"
    reason: str | None = None
    verdict = r.result
    if r.result == "ours":
        pass
    elif r.result == "stopped":
        reason = f"{ref} {_state_words(r.service)} and nothing listens on port {port}"
    elif r.result == "no-listener":
        reason = f"{ref} runs (pid {r.pid}) but nothing listens on port {port} yet"
    elif r.result == "untrusted":
        verdict, reason = "unknown", f"cannot tell who holds port {port} of {ref}: {r.why}"
    elif r.service == "ours":
        reason = f"port {port} of {ref} is held by {held}, not by the process group we launched (pid {r.pid})"
    else:
        reason = (
            f"{ref} {_state_words(r.service)}; port {port} is held by {held}, not the service we launched"
        )
    if verdict not in ("ours", "stopped", "foreign", "no-listener", "unknown"):
        verdict, reason = "unknown", f"unexpected answer {r.result!r} from {r.PROGRAM}"
    return TargetIdentity(
        ref=ref,
        kind="launched",
        verdict=verdict,  # type: ignore[arg-type]  # checked just above
        verified=verdict == "ours",
        reason=reason,
        port=port,
        service_pid=r.pid,
        listener_pids=list(r.holders) or None,
        listener_program=r.program,
        checked_at=time.time(),
    )


async def check_listener(calls: HostCalls, svc: SvcState, ref: str) -> TargetIdentity:
    """Ask the host who holds the service's port; an `unknown` identity (never verified) when it cannot say."""
    payload = {**calls.files(svc), "port": running_port(svc.spec, svc.proc)}
    try:
        reply = await calls.run(LISTENER, payload, TIMEOUT, ListenerReply)
    except TransportError as e:
        return TargetIdentity(
            ref=ref, kind="launched", verdict="unknown", checked_at=time.time(),
            reason=f"cannot tell who holds the port of {ref}: {e}",
        )  # fmt: skip
    return identity_of(ref, reply)


__all__ = ["LISTENER", "ListenerReply", "check_listener", "identity_of"]

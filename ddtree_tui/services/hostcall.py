"""Running a host program (`ddtree_tui/remote/`) for a ServiceManager: one JSON request in, one reply out.

Launch, kill, the one-shot watch and read_log all go the same way: the host's Python in isolated mode runs
the program's source, the request goes on stdin, and the last JSON line of stdout is read into the reply's
pydantic model (`replies`). The request names a service's files on the host and the argv hashes its pidfile
may show (`files`), so the host side signals nothing we did not start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel

from ddtree_tui.services.launchline import argv_hash, build_launch, host_python, service_paths
from ddtree_tui.services.replies import last_json_object, parse_reply
from ddtree_tui.services.svcstate import ServiceBook, SvcState
from ddtree_tui.transport.base import Transport, TransportError

R = TypeVar("R", bound=BaseModel)

__all__ = ["HostCalls"]


class HostCalls:
    """Runs host programs on one host for the book's services."""

    def __init__(self, transport: Transport, book: ServiceBook) -> None:
        self.transport = transport
        self._book = book
        self.python = host_python(book.profile)

    def argv(self, script: str) -> list[str]:
        """The command line that runs a host program's source with the host's Python."""
        return [self.python, "-I", "-c", script]

    async def run(self, script: str, payload: Mapping[str, object], timeout: float, reply: type[R]) -> R:
        """Run a host program with a JSON payload on stdin; its one JSON reply line as `reply`.

        TransportError when the host cannot be reached or the program gives no reply (BadReply, one of
        those, when the reply has the wrong shape)."""
        res = await self.transport.run(self.argv(script), input=json.dumps(payload), timeout=timeout)
        host = self._book.host
        data = last_json_object(res.stdout)
        if data is not None:
            program = getattr(reply, "PROGRAM", reply.__name__)
            return parse_reply(reply, data, f"{program} on {host}")
        why = (res.stderr.strip() or res.stdout.strip() or "no output")[-500:]
        if res.timed_out:
            why = f"timed out after {timeout:.0f} s"
        raise TransportError(f"helper on {host} failed ({self.python}): {why}")

    def accept(self, svc: SvcState) -> list[str]:
        """The argv hashes a pidfile's process may show to be ours: the spec's argv now, and what we launched."""
        try:
            now = {argv_hash(build_launch(self._book.profile, svc.spec).argv)}
        except Exception:  # a spec we do not launch ourselves has no argv of ours
            now = set()
        return sorted(now | svc.launched_hashes)

    def files(self, svc: SvcState) -> dict[str, str | list[str]]:
        """The service's files on the host and the argv hashes it may run: what watch, launch and kill get."""
        p = service_paths(self._book.profile, svc.spec.name)
        keys = ("workdir", "pidfile", "exitfile", "stopping", "log")
        return {**{k: p[k] for k in keys}, "accept": self.accept(svc)}

    def watch_config(self) -> list[dict[str, str | list[str]]]:
        """Every service's files, as the watcher's request lists them."""
        return [{"name": svc.spec.name, **self.files(svc)} for svc in self._book]

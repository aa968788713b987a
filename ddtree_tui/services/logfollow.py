"""A host's service logs: one `tail -F` a service while the manager runs, and reading / following on demand.

Each line is redacted (SGLang prints its server_args, `--api-key` included), kept as the service's last
lines, handed to the `on_log` listener and to every `follow_log` reader, and parsed (`logs.parse_line`):
SGLang's decode and prefill lines carry the accept length, throughput and queue numbers the status shows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from ddtree_tui.services import hostscripts
from ddtree_tui.services.hostcall import HostCalls
from ddtree_tui.services.launchline import service_paths
from ddtree_tui.services.logs import parse_line
from ddtree_tui.services.publish import Listeners, Publisher
from ddtree_tui.services.redaction import Redactor
from ddtree_tui.services.replies import ReadLogReply
from ddtree_tui.services.svcstate import ServiceBook, SvcState
from ddtree_tui.transport.base import TransportError

__all__ = ["LogFollower"]


class LogFollower:
    """Follows, reads and parses the logs of the book's services."""

    def __init__(
        self,
        calls: HostCalls,
        book: ServiceBook,
        pub: Publisher,
        redactor: Redactor,
        listeners: Listeners,
        *,
        interval: float,
        follow_lines: int,
    ) -> None:
        self._calls = calls
        self._book = book
        self._pub = pub
        self._redactor = redactor
        self._listeners = listeners
        self._interval = interval
        self._follow_lines = follow_lines
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._subscribers: dict[str, set[asyncio.Queue[str]]] = {}

    def _log(self, name: str) -> str:
        return service_paths(self._book.profile, name)["log"]

    def on_line(self, svc: SvcState, line: str) -> None:
        """One line of the service's log: kept, passed on, and its numbers into the status."""
        line = self._redactor.text(line)  # SGLang prints its server_args, --api-key included
        name = svc.spec.name
        svc.lines.append(line)
        on_log = self._listeners.on_log
        if on_log is not None:
            with contextlib.suppress(Exception):
                on_log(name, line)
        for q in list(self._subscribers.get(name, ())):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(line)
        m = parse_line(line)
        if m is not None and svc.proc is not None and svc.proc.alive:
            svc.metrics, svc.metrics_at = m, self._book.clock()
            upd: dict[str, Any] = {}
            if m.kind == "decode":
                upd.update(
                    accept_length=m.accept_len, accept_rate=m.accept_rate, gen_throughput=m.gen_throughput
                )
            upd.update(running_reqs=m.running_req, queue_reqs=m.queue_req, token_usage=m.usage)
            seen = {k: v for k, v in upd.items() if v is not None}
            observed = {**svc.status.observed_at, **dict.fromkeys(seen, svc.metrics_at)}
            self._pub.set(svc, **seen, observed_at=observed)
            on_metrics = self._listeners.on_metrics
            if on_metrics is not None:
                with contextlib.suppress(Exception):
                    on_metrics(name, m)
        elif svc.status.state == "starting" and line.strip():
            self._pub.set(svc, detail=line)

    async def _loop(self, svc: SvcState) -> None:
        log = self._log(svc.spec.name)
        n = self._follow_lines
        while True:
            try:
                async for line in self._calls.transport.stream(["tail", "-n", str(n), "-F", log]):
                    self.on_line(svc, line)
            except asyncio.CancelledError:
                raise
            except Exception:
                pass
            n = 0  # after a reconnect, only new lines
            await asyncio.sleep(max(self._interval, 1.0))

    def start(self, svc: SvcState) -> None:
        """Follow `svc`'s log from now on (until stop)."""
        n = f"{self._book.host}/{svc.spec.name}"
        self._tasks[svc.spec.name] = asyncio.create_task(self._loop(svc), name=f"follow-{n}")

    def take_tasks(self) -> list[asyncio.Task[None]]:
        """The follower tasks, handed over to be cancelled (stop)."""
        tasks, self._tasks = list(self._tasks.values()), {}
        return tasks

    async def read_log(self, name: str, lines: int = 40) -> list[str]:
        """The last lines of a service's log (empty when it has none yet)."""
        log = self._log(self._book.get(name).spec.name)
        try:
            r = await self._calls.run(hostscripts.READ_LOG, {"path": log, "lines": lines}, 20, ReadLogReply)
        except TransportError as e:
            raise TransportError(f"cannot read {log}: {str(e)[-300:]}") from None
        return self._redactor.lines(r.lines)

    async def follow_log(
        self, name: str, on_gap: Callable[[str], None] | None = None, retry_s: float = 1.0
    ) -> AsyncIterator[str]:
        """New lines of a service's log as they come: shares the follower when it runs, else opens its own
        `tail -F` (which keeps following across a restart's log rotation). A dropped connection does not
        end it: it waits for the reconnect and follows on (`on_gap` hears about the gap)."""
        self._book.get(name)
        task = self._tasks.get(name)
        if task is not None and not task.done():
            q: asyncio.Queue[str] = asyncio.Queue(maxsize=10000)
            subs = self._subscribers.setdefault(name, set())
            subs.add(q)
            try:
                while True:
                    yield await q.get()
            finally:
                subs.discard(q)
            return
        log, host, transport = self._log(name), self._book.host, self._calls.transport
        while True:
            why = "the log stream ended"
            try:
                async for line in transport.stream(["tail", "-n", "0", "-F", log]):
                    yield self._redactor.text(line)
            except TransportError as e:
                why = str(e) or why
            # `tail -F` never ends by itself: the connection dropped (or tail was killed)
            if on_gap is not None:
                on_gap(f"{host}: {why}; following again once the host is back")
            await asyncio.sleep(retry_s)
            while not await transport.wait_connected(30):
                pass
            if on_gap is not None:
                on_gap(f"{host}: reconnected; lines written meanwhile are not shown (logs -n N)")

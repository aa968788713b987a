"""Keeping a host's process states current: the watcher stream (remote/watch.py) and the one-shot pass.

One long-lived stream reports every service's process state each interval; when it breaks (the host
reboots, ssh drops, the program dies) every service is marked unreachable and the stream is restarted with
backoff. Without a running stream, `refresh` asks once. A record goes into the service's `SvcState` and the
status is recomputed (`publish.Publisher`); health, logs and actions are other parts' jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque

from ddtree_tui.lib.retry import Backoff
from ddtree_tui.lib.tasks import cancel_and_wait
from ddtree_tui.services import hostscripts
from ddtree_tui.services.hostcall import HostCalls
from ddtree_tui.services.publish import Publisher
from ddtree_tui.services.redaction import Redactor
from ddtree_tui.services.replies import BadReply, WatchLine, WatchRecord, last_json_object, parse_reply
from ddtree_tui.services.svcstate import ServiceBook
from ddtree_tui.transport.base import TransportError

__all__ = ["Watcher", "parse_watch"]


def parse_watch(text: str) -> dict[str, WatchRecord] | None:
    """The records of the last watcher line in `text`; None when there is none, BadReply when it is malformed."""
    data = last_json_object(text, "services")
    return parse_reply(WatchLine, data, WatchLine.PROGRAM).services if data is not None else None


class Watcher:
    """The process side of one host's services: the watcher stream, the one-shot pass, and applying records."""

    def __init__(
        self, calls: HostCalls, book: ServiceBook, pub: Publisher, redactor: Redactor, interval: float
    ) -> None:
        self._calls = calls
        self._book = book
        self._pub = pub
        self._redactor = redactor
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def _request(self, once: bool) -> str:
        return json.dumps({"interval": self._interval, "services": self._calls.watch_config(), "once": once})

    # --- taking records in ---------------------------------------------------------------------------------
    def apply(self, name: str, rec: WatchRecord) -> None:
        """Take in a process record (the watcher's, or what launch/kill just did) and recompute."""
        svc = self._book.find(name)
        if svc is None:
            return
        prev_pid = svc.proc.pid if svc.proc is not None else None
        svc.proc = rec
        svc.unreachable = None
        if rec.pid != prev_pid:
            svc.health, svc.fail_count, svc.fail_since, svc.info = None, 0, None, None
            svc.info_seen, svc.sglang, svc.sglang_seen = {}, None, {}  # another process's figures and times
            svc.probe_note = None
        if rec.alive:
            svc.pids = list(rec.pids)
            if rec.last and not svc.lines:
                svc.lines.append(self._redactor.text(rec.last[-1]))
        else:
            # a main process that died leaves its workers' pids: still the service's (GPU memory, kill)
            svc.pids = list(rec.orphans)
        self._pub.recompute(svc)

    def mark_unreachable(self, err: str) -> None:
        for svc in self._book:
            svc.unreachable = err
            self._pub.recompute(svc)

    # --- one pass ------------------------------------------------------------------------------------------
    async def refresh(self) -> bool:
        """One pass of process states now; False when the host did not answer (every service is marked)."""
        try:
            res = await self._calls.transport.run(
                self._calls.argv(hostscripts.WATCH), input=self._request(once=True), timeout=20
            )
        except TransportError as e:
            self.mark_unreachable(str(e))
            return False
        try:
            data = parse_watch(res.stdout)
        except BadReply as e:
            self.mark_unreachable(str(e))
            return False
        if data is None:
            self.mark_unreachable(f"status helper failed: {(res.stderr or res.stdout).strip()[-300:]}")
            return False
        for name, rec in data.items():
            self.apply(name, rec)
        return True

    # --- the stream ----------------------------------------------------------------------------------------
    async def _watch_once(self) -> tuple[str, bool]:
        """Follow one watcher stream until it breaks: why it broke, and whether any line came through."""
        err, seen = "watcher ended", False
        agen = self._calls.transport.stream(
            self._calls.argv(hostscripts.WATCH), input=self._request(once=False), stderr=True
        )
        stale_after = max(3 * self._interval, 10.0)
        tail_err: deque[str] = deque(maxlen=5)
        try:
            while True:
                try:
                    # asyncio.timeout, never wait_for: on Python 3.11 wait_for returns a result that
                    # races a cancel and drops the cancel, and stop() would then wait on this loop forever
                    async with asyncio.timeout(stale_after):
                        line = await anext(agen)
                except StopAsyncIteration:
                    if tail_err:
                        err = "watcher: " + " | ".join(tail_err)
                    break
                except TimeoutError:
                    err = f"no status from host for {stale_after:.0f} s"
                    break
                try:
                    data = parse_watch(line)
                except BadReply as e:
                    data, line = None, str(e)
                if data is None:
                    tail_err.append(line[-200:])
                    continue
                seen = True
                for name, rec in data.items():
                    self.apply(name, rec)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # TransportError or the connection dropping under us
            err = str(e) or type(e).__name__
        finally:
            with contextlib.suppress(Exception):
                await agen.aclose()
        return err, seen

    async def _loop(self) -> None:
        """The watcher stream: one JSON line per interval; restarted with backoff when it breaks."""
        backoff = Backoff(first=self._interval, cap=15.0)
        while True:
            err, seen = await self._watch_once()
            if seen:
                backoff.reset()
            self.mark_unreachable(err)
            await backoff.sleep()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"watch-{self._book.host}")

    def take_tasks(self) -> list[asyncio.Task[None]]:
        """The running stream's task, handed over to be cancelled (stop)."""
        t, self._task = self._task, None
        return [t] if t is not None else []

    async def restart(self) -> None:
        """A new stream (the services changed: the running one watches the old list)."""
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = asyncio.create_task(self._loop(), name=f"watch-{self._book.host}")

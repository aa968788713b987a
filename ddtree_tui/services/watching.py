"""Keeping a host's service statuses current: the watcher stream, health probes and log followers.

One long-lived watcher (remote/watch.py) reports every service's process state each interval; one prober
a service asks /health (and now and then /server_info and /metrics) through the transport's port forward
with one kept-alive httpx client; one `tail -F` a service follows its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from ddtree_tui.lib.retry import Backoff
from ddtree_tui.model.snapshot import ServiceStatus
from ddtree_tui.services import hostscripts
from ddtree_tui.services.health import HealthResult, fetch_server_info, probe_health
from ddtree_tui.services.launchline import service_paths
from ddtree_tui.services.logs import parse_line
from ddtree_tui.services.replies import (
    BadReply,
    ReadLogReply,
    WatchLine,
    WatchRecord,
    last_json_object,
    parse_reply,
)
from ddtree_tui.services.sglang_metrics import fetch_sglang_metrics
from ddtree_tui.services.status import running_port
from ddtree_tui.services.svcstate import ManagerCore, SvcState
from ddtree_tui.transport.base import TransportError


def parse_watch(text: str) -> dict[str, WatchRecord] | None:
    """The records of the last watcher line in `text`; None when there is none, BadReply when it is malformed."""
    data = last_json_object(text, "services")
    return parse_reply(WatchLine, data, WatchLine.PROGRAM).services if data is not None else None


class Watching(ManagerCore):
    """The watching half of a ServiceManager (start / stop / refresh / wait_state and the logs)."""

    def _watch_request(self, once: bool) -> str:
        return json.dumps({"interval": self.probe_interval, "services": self._watch_cfg(), "once": once})

    async def refresh(self) -> None:
        """One status pass now (process states, then a health probe of the live ones)."""
        try:
            res = await self.transport.run(
                [self._python, "-I", "-c", hostscripts.WATCH],
                input=self._watch_request(once=True),
                timeout=20,
            )
        except TransportError as e:
            self._mark_unreachable(str(e))
            return
        try:
            data = parse_watch(res.stdout)
        except BadReply as e:
            self._mark_unreachable(str(e))
            return
        if data is None:
            self._mark_unreachable(f"status helper failed: {(res.stderr or res.stdout).strip()[-300:]}")
            return
        for name, rec in data.items():
            self._apply_proc(name, rec)
        await asyncio.gather(
            *(
                self._probe(s)
                for s in self._svcs.values()
                if s.spec.launcher == "external" or (s.proc and s.proc.alive)
            )
        )

    async def _refresh_if_idle(self) -> None:
        if not self._started:
            await self.refresh()

    async def _watch_once(self) -> tuple[str, bool]:
        """Follow one watcher stream until it breaks: why it broke, and whether any line came through."""
        err, seen = "watcher ended", False
        agen = self.transport.stream(
            [self._python, "-I", "-c", hostscripts.WATCH], input=self._watch_request(once=False), stderr=True
        )
        stale_after = max(3 * self.probe_interval, 10.0)
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
                    self._apply_proc(name, rec)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # TransportError or the connection dropping under us
            err = str(e) or type(e).__name__
        finally:
            with contextlib.suppress(Exception):
                await agen.aclose()
        return err, seen

    async def _watch_loop(self) -> None:
        """The watcher stream: one JSON line per interval; restarted with backoff when it breaks."""
        backoff = Backoff(first=self.probe_interval, cap=15.0)
        while True:
            err, seen = await self._watch_once()
            if seen:
                backoff.reset()
            self._mark_unreachable(err)
            await backoff.sleep()

    # --- health --------------------------------------------------------------------------------------------
    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                trust_env=False, limits=httpx.Limits(max_keepalive_connections=8, keepalive_expiry=30)
            )
        return self._client

    async def base_url(self, name: str) -> str:
        """http://127.0.0.1:<local port> reaching the service's port on its host."""
        svc = self._svc(name)
        spec = svc.spec
        port = running_port(spec, svc.proc)
        remote = "127.0.0.1" if spec.bind in ("0.0.0.0", "", "::") else spec.bind
        key = (remote, port)
        if key not in self._forwards:
            self._forwards[key] = await self.transport.forward_port(port, remote)
        host = remote if self.profile.is_local and remote not in ("::1",) else "127.0.0.1"
        return f"http://{host}:{self._forwards[key]}"

    async def _probe(self, svc: SvcState) -> None:
        """One probe of one service; callers never run two at once for the same service."""
        try:
            base = await self.base_url(svc.spec.name)
        except Exception as e:
            h = HealthResult(ok=False, error=f"port forward failed: {e}", ts=time.time())
        else:
            h = await probe_health(self._http(), base, self.health_timeout)
            if h.ok and (svc.info is None or svc.info_age >= 5):
                info = await fetch_server_info(self._http(), base, self.health_timeout, svc.info is None)
                if info is not None:
                    if svc.info is not None and info.model_path is None:
                        info = info.model_copy(update={"model_path": svc.info.model_path})
                    svc.info = info
                svc.info_age = 0
                if h.ok and svc.spec.enable_metrics:
                    svc.sglang = await fetch_sglang_metrics(self._http(), base, self.health_timeout)
            svc.info_age += 1
        svc.health = h
        if h.ok:
            svc.fail_count, svc.fail_since = 0, None
        else:
            svc.fail_count += 1
            svc.fail_since = svc.fail_since or h.ts
        self._recompute(svc)

    async def _probe_loop(self, svc: SvcState) -> None:
        while True:
            external = svc.spec.launcher == "external"
            if external or (svc.proc and svc.proc.alive and not svc.killing):
                with contextlib.suppress(Exception):
                    await self._probe(svc)
            await asyncio.sleep(self.probe_interval)

    # --- logs ------------------------------------------------------------------------------------------------
    def _on_line(self, svc: SvcState, line: str) -> None:
        line = self._redact(line)  # SGLang prints its server_args, --api-key included
        svc.lines.append(line)
        if self.on_log is not None:
            with contextlib.suppress(Exception):
                self.on_log(svc.spec.name, line)
        for q in list(svc.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(line)
        m = parse_line(line)
        if m is not None and svc.proc is not None and svc.proc.alive:
            svc.metrics = m
            upd: dict[str, Any] = {}
            if m.kind == "decode":
                upd.update(
                    accept_length=m.accept_len, accept_rate=m.accept_rate, gen_throughput=m.gen_throughput
                )
            upd.update(running_reqs=m.running_req, queue_reqs=m.queue_req, token_usage=m.usage)
            self._set(svc, **{k: v for k, v in upd.items() if v is not None})
            if self.on_metrics is not None:
                with contextlib.suppress(Exception):
                    self.on_metrics(svc.spec.name, m)
        elif svc.status.state == "starting" and line.strip():
            self._set(svc, detail=line)

    async def _follow_loop(self, svc: SvcState) -> None:
        log = service_paths(self.profile, svc.spec.name)["log"]
        n = self.follow_lines
        while True:
            try:
                async for line in self.transport.stream(["tail", "-n", str(n), "-F", log]):
                    self._on_line(svc, line)
            except asyncio.CancelledError:
                raise
            except Exception:
                pass
            n = 0  # after a reconnect, only new lines
            await asyncio.sleep(max(self.probe_interval, 1.0))

    async def read_log(self, name: str, lines: int = 40) -> list[str]:
        """The last lines of a service's log (empty when it has none yet)."""
        log = service_paths(self.profile, self._svc(name).spec.name)["log"]
        try:
            r = await self._helper(hostscripts.READ_LOG, {"path": log, "lines": lines}, 20, ReadLogReply)
        except TransportError as e:
            raise TransportError(f"cannot read {log}: {str(e)[-300:]}") from None
        return self._redact_lines(r.lines)

    async def follow_log(
        self, name: str, on_gap: Callable[[str], None] | None = None, retry_s: float = 1.0
    ) -> AsyncIterator[str]:
        """New lines of a service's log as they come: shares the manager's follower when it runs, else opens
        its own `tail -F` (which keeps following across a restart's log rotation). A dropped connection
        does not end it: it waits for the reconnect and follows on (`on_gap` hears about the gap)."""
        svc = self._svc(name)
        if svc.follow_task is not None and not svc.follow_task.done():
            q: asyncio.Queue[str] = asyncio.Queue(maxsize=10000)
            svc.subscribers.add(q)
            try:
                while True:
                    yield await q.get()
            finally:
                svc.subscribers.discard(q)
        else:
            log = service_paths(self.profile, name)["log"]
            while True:
                why = "the log stream ended"
                try:
                    async for line in self.transport.stream(["tail", "-n", "0", "-F", log]):
                        yield self._redact(line)
                except TransportError as e:
                    why = str(e) or why
                # `tail -F` never ends by itself: the connection dropped (or tail was killed)
                if on_gap is not None:
                    on_gap(f"{self.profile.name}: {why}; following again once the host is back")
                await asyncio.sleep(retry_s)
                while not await self.transport.wait_connected(30):
                    pass
                if on_gap is not None:
                    on_gap(
                        f"{self.profile.name}: reconnected; lines written meanwhile are not shown (logs -n N)"
                    )

    # --- starting and stopping the watch -------------------------------------------------------------------
    async def start(self) -> None:
        """Watch every service: one watcher stream, a log follower and a health prober a service."""
        if self._started:
            return
        self._started = True
        self._watch_task = asyncio.create_task(self._watch_loop(), name=f"watch-{self.profile.name}")
        for svc in self._svcs.values():
            self._start_svc_tasks(svc)

    def _start_svc_tasks(self, svc: SvcState) -> None:
        n = f"{self.profile.name}/{svc.spec.name}"
        svc.follow_task = asyncio.create_task(self._follow_loop(svc), name=f"follow-{n}")
        svc.probe_task = asyncio.create_task(self._probe_loop(svc), name=f"probe-{n}")

    async def stop(self) -> None:
        """Stop watching; services keep running."""
        tasks: list[asyncio.Task[None]] = []
        if self._watch_task is not None:
            tasks.append(self._watch_task)
            self._watch_task = None
        for svc in self._svcs.values():
            for t in (svc.follow_task, svc.probe_task):
                if t is not None:
                    tasks.append(t)
            svc.follow_task = svc.probe_task = None
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._started = False
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _restart_watcher(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch_task
            self._watch_task = asyncio.create_task(self._watch_loop(), name=f"watch-{self.profile.name}")

    async def wait_state(self, name: str, states: set[str], timeout: float) -> ServiceStatus:
        """Wait until the service is in one of `states`; returns its status then, or the current status when
        the timeout passes first (check `.state`). Polls by itself when start() was not called."""
        svc = self._svc(name)
        deadline = time.monotonic() + timeout
        while True:
            if svc.status.state in states:
                return svc.status
            left = deadline - time.monotonic()
            if left <= 0:
                return svc.status
            if self._started:
                ev = self._changed
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await ev.wait()
            else:
                await self.refresh()
                if svc.status.state in states:
                    return svc.status
                await asyncio.sleep(min(self.probe_interval, max(0.0, deadline - time.monotonic())))

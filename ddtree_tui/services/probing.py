"""Health and server probing of one host's services, through the transport's port forwards.

One prober task a service asks `/health` each interval while the service runs (an external server: always),
and every fifth probe `/server_info` (and `/metrics` when the service exports it). Every request goes through
the manager's one aiohttp session (`probehttp`), each body under its cap: a `/server_info` or `/metrics` body
over its cap is noted on the service (its status detail says so) and the probing goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp

from ddtree_tui.services.health import HealthResult, fetch_server_info, probe_health
from ddtree_tui.services.probehttp import BodyTooLarge, new_session
from ddtree_tui.services.publish import Publisher
from ddtree_tui.services.sglang_metrics import fetch_sglang_metrics
from ddtree_tui.services.status import gauge_figures, info_figures, observed_times, running_port
from ddtree_tui.services.svcstate import ServiceBook, SvcState
from ddtree_tui.transport.base import Transport

__all__ = ["INFO_EVERY", "Prober"]

INFO_EVERY = 5  # probes between two reads of /server_info (and /metrics)


class Prober:
    """Probes the book's services over HTTP and records what it learns."""

    def __init__(
        self, transport: Transport, book: ServiceBook, pub: Publisher, interval: float, timeout: float
    ) -> None:
        self._transport = transport
        self._book = book
        self._pub = pub
        self._interval = interval
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._forwards: dict[tuple[str, int], int] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = new_session()
        return self._session

    async def close(self) -> None:
        """Close the session (its kept-alive connections); the next probe opens a new one."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def base_url(self, name: str) -> str:
        """http://127.0.0.1:<local port> reaching the service's port on its host."""
        svc = self._book.get(name)
        spec = svc.spec
        port = running_port(spec, svc.proc)
        remote = "127.0.0.1" if spec.bind in ("0.0.0.0", "", "::") else spec.bind
        key = (remote, port)
        if key not in self._forwards:
            self._forwards[key] = await self._transport.forward_port(port, remote)
        host = remote if self._book.profile.is_local and remote not in ("::1",) else "127.0.0.1"
        return f"http://{host}:{self._forwards[key]}"

    async def _server(self, svc: SvcState, base: str) -> None:
        """/server_info (and /metrics when the service exports it) into the service's facts."""
        http = self._http()
        notes: list[str] = []
        try:
            info = await fetch_server_info(http, base, self._timeout, svc.info is None)
        except BodyTooLarge as e:
            notes.append(str(e))
        else:
            if info is not None:
                if svc.info is not None and info.model_path is None:
                    info = info.model_copy(update={"model_path": svc.info.model_path})
                svc.info_seen = observed_times(
                    svc.info_seen, info_figures(svc.info), info_figures(info), self._book.clock(), svc.status
                )
                svc.info = info
        if svc.spec.enable_metrics:
            try:
                sg = await fetch_sglang_metrics(http, base, self._timeout)
                svc.sglang_seen = observed_times(
                    svc.sglang_seen,
                    gauge_figures(svc.sglang),
                    gauge_figures(sg),
                    self._book.clock(),
                    svc.status,
                )
                svc.sglang = sg
            except BodyTooLarge as e:
                svc.sglang = None
                notes.append(str(e))
        svc.probe_note = "; ".join(notes) or None

    async def probe(self, svc: SvcState) -> None:
        """One probe of one service; callers never run two at once for the same service."""
        try:
            base = await self.base_url(svc.spec.name)
        except Exception as e:
            h = HealthResult(ok=False, error=f"port forward failed: {e}", ts=time.time())
        else:
            h = await probe_health(self._http(), base, self._timeout)
            h = h.model_copy(update={"ts": self._book.clock()})  # observed now, by the fleet's clock
            if h.ok and (svc.info is None or svc.info_age >= INFO_EVERY):
                await self._server(svc, base)
                svc.info_age = 0
            svc.info_age += 1
        svc.health = h
        if h.ok:
            svc.fail_count, svc.fail_since = 0, None
        else:
            svc.fail_count += 1
            svc.fail_since = svc.fail_since or h.ts
        self._pub.recompute(svc)

    async def probe_live(self) -> None:
        """One probe of every service that runs (and of every external one), side by side."""
        live = [s for s in self._book if s.spec.launcher == "external" or (s.proc and s.proc.alive)]
        await asyncio.gather(*(self.probe(s) for s in live))

    async def _loop(self, svc: SvcState) -> None:
        while True:
            if svc.probed:
                with contextlib.suppress(Exception):
                    await self.probe(svc)
            await asyncio.sleep(self._interval)

    def start(self, svc: SvcState) -> None:
        """Probe `svc` every interval from now on (until stop)."""
        n = f"{self._book.host}/{svc.spec.name}"
        self._tasks[svc.spec.name] = asyncio.create_task(self._loop(svc), name=f"probe-{n}")

    def take_tasks(self) -> list[asyncio.Task[None]]:
        """The probe tasks, handed over to be cancelled (stop)."""
        tasks, self._tasks = list(self._tasks.values()), {}
        return tasks

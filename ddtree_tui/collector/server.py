"""`ddtree-tui serve`: one long-running Fleet (the same core the TUI runs) behind an aiohttp server.

Routes:
- `/metrics`    Prometheus exposition (prometheus_client; see metrics.py for the names)
- `/snapshot`   the `status --json` document (schema 1)
- `/events`     server-sent events: one `event: KIND` / `data: JSON` pair per fleet event
- `/logs?ref=HOST/SVC`  the tail of a service's log the fleet keeps (attached TUIs read it once)
- `/alerts`     the alerts active now (ddtree_tui.alerts)
- `/-/healthy`  200 while the process serves; `/-/ready` 200 once every host was tried once

Bound to loopback by default. A listen address off loopback is refused unless a token file is given; then
every route but the two probes asks for `Authorization: Bearer <token>`. The token is read from a file
(created 0600 when missing) and never appears in argv, logs, the screen or JSON. Every request must name this
server in `Host` and, when it sends an `Origin`, come from it (hostcheck.py: DNS rebinding, cross-site pages);
connections are capped and must send their headers in time (limits.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import stat
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ddtree_tui.bench.models import PromptFinished, RunFinished, RunStarted
from ddtree_tui.collector.hostcheck import AccessPolicy
from ddtree_tui.collector.intents import IntentRoutes
from ddtree_tui.collector.limits import LimitedSite, ServerLimits
from ddtree_tui.collector.metrics import CollectorCounters, make_registry
from ddtree_tui.lib import paths
from ddtree_tui.model.events import (
    AlertChanged,
    BenchEventWrap,
    Event,
    FleetEvent,
    ServiceStateChanged,
)
from ddtree_tui.model.intents import AnyIntent, Outcome
from ddtree_tui.model.snapshot import Alert, FleetSnapshot

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9464"
DEFAULT_TOKEN_FILE = paths.COLLECTOR_TOKEN
CLIENT_QUEUE = 1000
SSE_KEEPALIVE_S = 10.0


class ListenError(ValueError):
    """A --listen address that cannot be used (malformed, or off loopback without a token)."""


class FleetSource(Protocol):
    """What the collector reads from the core: ddtree_tui.fleet.Fleet satisfies it."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def snapshot(self) -> FleetSnapshot: ...
    def subscribe(self) -> asyncio.Queue[FleetEvent]: ...
    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None: ...
    def log_lines(self, ref: str) -> list[str]: ...
    async def do(self, intent: AnyIntent) -> Outcome: ...  # the intents' door (collector/intents.py)
    def publish(self, ev: FleetEvent) -> None: ...


@runtime_checkable
class SettlingFleet(Protocol):
    """A fleet that can say when every host has connected and sent a first sample (a live Fleet can)."""

    async def wait_settled(self, timeout: float) -> None: ...


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT' or '[v6]:PORT' -> (host, port); raises ListenError with what is wrong."""
    s = text.strip()
    if s.startswith("["):
        host, sep, rest = s[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ListenError(f"--listen {text!r}: expected [ADDRESS]:PORT")
        port_s = rest[1:]
    else:
        host, sep, port_s = s.rpartition(":")
        if not sep:
            raise ListenError(f"--listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    try:
        port = int(port_s)
    except ValueError:
        raise ListenError(f"--listen {text!r}: port {port_s!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ListenError(f"--listen {text!r}: port {port} out of range")
    if not host:
        raise ListenError(f"--listen {text!r}: give an address (use 0.0.0.0 for every interface)")
    return host, port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The token in `path`; a new random one written 0600 when the file is missing. (token, created).
    Refuses a file that others can read."""
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ListenError(f"token file {path} is readable by others (mode {mode:o}); chmod 600 it")
        token = path.read_text(encoding="utf-8").strip()
        if len(token) < 16:
            raise ListenError(f"token file {path} holds no usable token (at least 16 characters)")
        return token, False
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, True


def _event_json(ev: Any) -> dict[str, Any]:
    """A fleet event as a JSON object (its `kind` says which)."""
    d: dict[str, Any] = ev.model_dump(mode="json")
    return d


class Collector:
    """Owns the fleet's event subscription: counts for /metrics, fans events out to SSE clients and to the
    optional recorder. `snapshot()` is the fleet's, read at request time."""

    def __init__(
        self,
        fleet: FleetSource,
        *,
        token: str | None = None,
        intents: bool = False,
        intent_token: str | None = None,
        policy: AccessPolicy | None = None,
    ) -> None:
        self.fleet = fleet
        self.policy = policy  # the Host/Origin check; None only for an app tested in-process
        self.token = token  # guards every route but the probes (asked for with --token-file)
        self.intents = IntentRoutes(fleet, intent_token or token, intents)
        self.counters = CollectorCounters()
        self.registry = make_registry(self.snapshot, self.counters)
        self.started_at = time.time()
        self.ready = False
        self._clients: set[asyncio.Queue[str]] = set()
        self._pump_task: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._ever_ran: set[tuple[str, str]] = set()
        self.listeners: list[Callable[[Any], None]] = []  # recorder, alerts: called for every event
        self.scrapes = 0
        self.alerts: dict[tuple[str, str, str], Alert] = {}  # the active ones, for /alerts

    def snapshot(self) -> FleetSnapshot:
        return self.fleet.snapshot()

    async def start(self, settle_timeout: float = 10.0) -> None:
        self._queue = self.fleet.subscribe()
        self._pump_task = asyncio.create_task(self._pump(), name="collector-pump")
        await self.fleet.start()
        if isinstance(self.fleet, SettlingFleet):
            with contextlib.suppress(Exception):
                await self.fleet.wait_settled(settle_timeout)
        self.ready = True

    async def stop(self) -> None:
        if self._pump_task is not None:
            self._pump_task.cancel()
            with contextlib.suppress(BaseException):
                await self._pump_task
        if self._queue is not None:
            self.fleet.unsubscribe(self._queue)
        for q in list(self._clients):
            self._offer(q, "")  # "" tells the SSE handler to end the stream
        await self.fleet.stop()

    # --- events ----------------------------------------------------------------------------------------
    async def _pump(self) -> None:
        assert self._queue is not None
        while True:
            ev = await self._queue.get()
            self.handle_event(ev)

    def handle_event(self, ev: FleetEvent) -> None:
        """Count one event, hand it to listeners, fan it out to every SSE client (bounded, drop oldest)."""
        kind = ev.kind if isinstance(ev, Event) else type(ev).__name__
        c = self.counters
        c.events[kind] = c.events.get(kind, 0) + 1
        if isinstance(ev, ServiceStateChanged):
            key = (ev.host, ev.status.name)
            state = ev.status.state
            if state in ("ready", "unhealthy"):
                self._ever_ran.add(key)
            elif state == "starting" and key in self._ever_ran:
                c.restarts[key] = c.restarts.get(key, 0) + 1
                self._ever_ran.discard(key)
        elif isinstance(ev, BenchEventWrap):
            self._bench(ev.event)
        elif isinstance(ev, AlertChanged):
            a = ev.alert
            akey = (a.kind, a.host, a.subject)
            if a.active:
                c.alerts_active[akey] = 1
                c.alerts_fired[a.kind] = c.alerts_fired.get(a.kind, 0) + 1
                self.alerts[akey] = a
            else:
                c.alerts_active.pop(akey, None)
                self.alerts.pop(akey, None)
        for fn in self.listeners:
            try:
                fn(ev)
            except Exception:  # a listener's bug never stops the stream
                log.exception("collector listener failed")
        if not self._clients:
            return
        try:
            msg = f"event: {kind}\ndata: {json.dumps(_event_json(ev), separators=(',', ':'))}\n\n"
        except Exception:
            log.exception("event %s not serialisable", kind)
            return
        for q in list(self._clients):
            self._offer(q, msg)

    def _bench(self, bev: object) -> None:
        """Bench progress for /metrics from the engine's event models; an event that reached us as a dict
        (it did not parse) still counts by its kind."""
        c = self.counters
        kind = bev.get("kind") if isinstance(bev, dict) else None
        if isinstance(bev, RunStarted):
            c.bench_running, c.bench_done, c.bench_total = True, 0, bev.total
        elif kind == "run_started":
            c.bench_running, c.bench_done, c.bench_total = True, 0, 0
        elif isinstance(bev, PromptFinished):
            c.bench_done, c.bench_total = bev.done, bev.total
            if bev.result.error:
                c.bench_failed_requests += 1
        elif isinstance(bev, RunFinished) or kind == "run_finished":
            c.bench_running = False
            c.bench_runs += 1

    @staticmethod
    def _offer(q: asyncio.Queue[str], msg: str) -> None:
        if q.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                q.get_nowait()
        q.put_nowait(msg)

    def add_client(self) -> asyncio.Queue[str]:
        q: asyncio.Queue[str] = asyncio.Queue(maxsize=CLIENT_QUEUE)
        self._clients.add(q)
        self.counters.event_clients = len(self._clients)
        return q

    def remove_client(self, q: asyncio.Queue[str]) -> None:
        self._clients.discard(q)
        self.counters.event_clients = len(self._clients)

    @property
    def client_count(self) -> int:
        return len(self._clients)

    # --- HTTP ------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        guards = [self.policy.middleware()] if self.policy is not None else []
        app = web.Application(middlewares=[*guards, self._auth])
        app.router.add_get("/metrics", self.h_metrics)
        app.router.add_get("/snapshot", self.h_snapshot)
        app.router.add_get("/events", self.h_events)
        app.router.add_get("/logs", self.h_logs)
        app.router.add_get("/alerts", self.h_alerts)
        app.router.add_get("/-/healthy", self.h_healthy)
        app.router.add_get("/-/ready", self.h_ready)
        app.router.add_get("/", self.h_index)
        self.intents.add_to(app)
        return app

    @web.middleware
    async def _auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if (
            self.token is not None
            and request.path not in ("/-/healthy", "/-/ready")
            and not request.path.startswith("/intents/")
        ):
            got = request.headers.get("Authorization", "")
            want = f"Bearer {self.token}"
            if not hmac.compare_digest(got.encode(), want.encode()):
                return web.json_response({"error": "missing or wrong bearer token"}, status=401)
        return await handler(request)

    async def h_metrics(self, request: web.Request) -> web.Response:
        """The snapshot and a copy of the counters are taken here, on the loop; the text is made in a thread,
        so a large fleet's scrape does not hold up the event stream."""
        self.scrapes += 1
        snap, counters = self.snapshot(), self.counters.copy()
        body = await asyncio.to_thread(generate_latest, make_registry(lambda: snap, counters))
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def h_snapshot(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot().to_json_dict())

    async def h_logs(self, request: web.Request) -> web.Response:
        ref = request.query.get("ref", "")
        if "/" not in ref:
            return web.json_response({"error": "give ?ref=HOST/SVC"}, status=400)
        return web.json_response({"ref": ref, "lines": self.fleet.log_lines(ref)})

    async def h_alerts(self, request: web.Request) -> web.Response:
        items = sorted(self.alerts.values(), key=lambda a: (a.host, a.subject, a.kind))
        return web.json_response({"alerts": [a.model_dump(mode="json") for a in items]})

    async def h_healthy(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def h_ready(self, request: web.Request) -> web.Response:
        if not self.ready:
            return web.Response(text="starting\n", status=503)
        return web.Response(text="ready\n")

    async def h_index(self, request: web.Request) -> web.Response:
        return web.Response(
            text="ddtree-tui collector: /metrics /snapshot /events /alerts /logs?ref=HOST/SVC /-/ready /-/healthy\n"
        )

    async def h_events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await resp.prepare(request)
        q = self.add_client()
        try:
            await resp.write(b": ddtree-tui collector event stream\n\n")
            while True:
                try:
                    async with asyncio.timeout(SSE_KEEPALIVE_S):
                        msg = await q.get()
                except TimeoutError:
                    await resp.write(b": keepalive\n\n")
                    continue
                if msg == "":
                    break
                await resp.write(msg.encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.remove_client(q)
        return resp


async def serve(
    fleet: FleetSource,
    host: str,
    port: int,
    *,
    token: str | None = None,
    intents: bool = False,
    intent_token: str | None = None,
    stop: asyncio.Event | None = None,
    on_listening: Callable[[Collector, int], None] | None = None,
    setup: Callable[[Collector], None] | None = None,
    policy: AccessPolicy | None = None,
    limits: ServerLimits | None = None,
) -> None:
    """Serve `fleet` on host:port until `stop` is set (or the task is cancelled). `policy`: the Host/Origin
    check (by default: the listen address and its loopback aliases); `limits`: connections and header time."""
    policy = policy or AccessPolicy(host, port)
    limits = limits or ServerLimits()
    coll = Collector(fleet, token=token, intents=intents, intent_token=intent_token, policy=policy)
    if setup is not None:
        setup(coll)
    refused = coll.counters.refused

    def count_refusal(reason: str) -> None:
        refused[reason] = refused.get(reason, 0) + 1

    policy.listeners.append(count_refusal)
    runner = web.AppRunner(coll.app(), access_log=None, handle_signals=False, **limits.runner_kwargs())
    await runner.setup()
    site = LimitedSite(runner, host, port, limits, on_refuse=count_refusal)
    try:
        await site.start()
        bound = port
        if runner.addresses:  # port 0: the one the system chose
            bound = int(runner.addresses[0][1])
        policy.bind(bound)
        if on_listening is not None:
            on_listening(coll, bound)
        await coll.start()
        await (stop or asyncio.Event()).wait()
    finally:
        with contextlib.suppress(Exception):
            await coll.stop()
        await runner.cleanup()

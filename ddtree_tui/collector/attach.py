"""AttachedFleet: the fleet as a collector (`ddtree-tui serve`) sees it, over HTTP, for a TUI started with
`--attach URL`. It opens no ssh connection of its own: several TUIs (and browsers) share the collector's.

It reads `/snapshot` once per connection (and again every `refresh_s`), then follows `/events` (server-sent
events), folding host, GPU and service events into its copy of the snapshot and passing every event on to its
own subscribers, exactly like Fleet does. When the collector goes away the copy stays on screen, each host says
"collector unreachable", `banner()` says so with the time it was lost, a Notice is published, and it reconnects
with backoff; nothing waits on the network while painting.

Intents (launch, kill, restart, move, bench) are POSTed to the collector, which carries them out when it runs
with `--intents` and the bearer token matches; otherwise the collector's refusal is the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from pydantic import TypeAdapter

from ddtree_tui.bench.models import BenchEvent, BenchRequest
from ddtree_tui.bench.results import AnyRun
from ddtree_tui.bench.smoke import SmokeResult, failed
from ddtree_tui.config import HostProfile
from ddtree_tui.doctor import DoctorReport, Finding
from ddtree_tui.lib import http
from ddtree_tui.lib.pubsub import QUEUE_SIZE, PubSub
from ddtree_tui.model.events import (
    BenchEventWrap,
    FleetEvent,
    GpuSampleEvent,
    HostStateChanged,
    LogLine,
    Notice,
    ServiceStateChanged,
    TodoChanged,
)
from ddtree_tui.model.intents import AnyIntent, Outcome, Todo, describe, intent_body
from ddtree_tui.model.snapshot import FleetSnapshot, HostView
from ddtree_tui.model.todo import ItemEvidence

log = logging.getLogger(__name__)

LOG_LINES_KEPT = 500
HISTORY_KEPT = 600
SNAPSHOT_CAP = 64 * http.MIB  # a snapshot of a few hundred hosts with their todos is a few MiB
EVENT_CAP = http.LINE_CAP  # one server-sent event line
INTENT_REPLY_CAP = http.MIB  # an intent's answer is one small JSON object
_EVENT = TypeAdapter(FleetEvent)
_BENCH_EVENT: TypeAdapter[BenchEvent] = TypeAdapter(BenchEvent)


class AttachedTodos:
    """The attached view's todo list: empty and read-only (todos live with the collector)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.error: str | None = None
        self.read_only = True
        self.path: Path | None = None


def read_token(path: str | Path | None) -> str | None:
    """The bearer token in a file (never from argv); None without a file."""
    if not path:
        return None
    return Path(path).read_text(encoding="utf-8").strip() or None


def parse_sse(lines: list[str]) -> tuple[str | None, str]:
    """One SSE message (its lines, without the blank line that ends it) -> (event name, data)."""
    name: str | None = None
    data: list[str] = []
    for ln in lines:
        if ln.startswith(":"):
            continue
        field, _, value = ln.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    return name, "\n".join(data)


def decode_event(data: str) -> FleetEvent | None:
    """A collector's event JSON back into the fleet's event model (bench events into their models)."""
    try:
        raw = json.loads(data)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    try:
        ev = _EVENT.validate_python(raw)
    except Exception:
        return None
    if isinstance(ev, BenchEventWrap) and isinstance(ev.event, dict):
        with contextlib.suppress(Exception):
            ev = ev.model_copy(update={"event": _BENCH_EVENT.validate_python(ev.event)})
    return ev


class FollowerFleet(PubSub[Any]):
    """A read-only fleet that follows someone else's snapshots and events (a collector, a recording):
    folds host, GPU and service events into its snapshot copy, keeps log tails and GPU history, passes every
    event on to its subscribers, and refuses intents. Satisfies the UI's FleetLike."""

    source_label = "another fleet"

    def __init__(self) -> None:
        self.todos = AttachedTodos()
        self._snap = FleetSnapshot(ts=time.time(), hosts=[])
        PubSub.__init__(self, QUEUE_SIZE)
        self._logs: dict[str, deque[str]] = {}
        self._history: dict[tuple[str, int], deque[float]] = {}
        self._floor = 0.0  # the time of the last full snapshot: older state events are stale
        self._task: asyncio.Task[None] | None = None  # what follows the source (a collector, a recording)

    async def start(self) -> None:
        """Subclasses start the task that follows their source."""

    async def stop(self) -> None:
        """Cancel the task that follows the source, if one runs."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def banner(self) -> str:
        return self.source_label

    # --- events --------------------------------------------------------------------------------------------
    def _hist(self, host: str, gpu: int) -> deque[float]:
        return self._history.setdefault((host, gpu), deque(maxlen=HISTORY_KEPT))

    def _apply(self, ev: FleetEvent) -> None:
        """Fold an event into the local snapshot copy (the collector's own snapshot refreshes it too)."""
        if isinstance(ev, LogLine):
            ref = f"{ev.host}/{ev.service}"
            self._logs.setdefault(ref, deque(maxlen=LOG_LINES_KEPT)).append(ev.line)
            return
        if not isinstance(ev, HostStateChanged | GpuSampleEvent | ServiceStateChanged):
            return
        if ev.ts < self._floor:  # already in the full snapshot read after it was sent
            return
        hosts = list(self._snap.hosts)
        i = next((n for n, h in enumerate(hosts) if h.name == ev.host), None)
        if i is None:
            return  # a host we do not know yet: the next full snapshot brings it
        h = hosts[i]
        if isinstance(ev, HostStateChanged):
            st = ev.status
            h = h.model_copy(update={"state": st.state, "error": st.error, "next_retry_at": st.next_retry_at})
        elif isinstance(ev, GpuSampleEvent):
            old = {g.index: g for g in h.gpus}
            gpus = []
            for g in ev.gpus:
                prev = old.get(g.index)
                if g.service is None and prev is not None and prev.service:  # labelled by the collector
                    g = g.model_copy(update={"service": prev.service})
                gpus.append(g)
                if g.util_gpu is not None:
                    self._hist(h.name, g.index).append(float(g.util_gpu))
            h = h.model_copy(update={"host": ev.host_sample, "gpus": gpus, "telemetry": ev.telemetry})
        else:
            svcs = list(h.services)
            j = next((n for n, s in enumerate(svcs) if s.name == ev.status.name), None)
            if j is None:
                svcs.append(ev.status)
            else:
                svcs[j] = ev.status
            h = h.model_copy(update={"services": svcs})
        if not isinstance(ev, HostStateChanged):
            h = label_gpus(h)
        hosts[i] = h
        self._snap = self._snap.model_copy(update={"hosts": hosts, "ts": max(self._snap.ts, ev.ts)})

    # --- reads ---------------------------------------------------------------------------------------------
    def snapshot(self) -> FleetSnapshot:
        return self._snap

    def gpu_history(self, host: str, gpu_index: int, metric: str = "util_gpu") -> list[float]:
        if metric != "util_gpu":
            return []
        return list(self._history.get((host, gpu_index), ()))

    def log_lines(self, ref: str) -> list[str]:
        return list(self._logs.get(ref, ()))

    def profiles(self) -> list[HostProfile]:
        return []

    def todo_evidence(self) -> list[ItemEvidence]:
        return []

    def bench_history(self) -> list[AnyRun]:
        return []

    # --- intents: refused ----------------------------------------------------------------------------------
    def read_only_reason(self) -> str | None:
        """Why this view takes no intents (the TUI offers none and says this at once), None if it does."""
        return f"this view follows {self.source_label}, which takes no intents here"

    def _refuse(self, what: str) -> Outcome:
        return Outcome.refused(
            f"{what}: this view follows {self.source_label}, which takes no intents here",
            "run the action where the collector runs, or with the headless CLI",
        )

    async def do(self, intent: AnyIntent) -> Outcome:
        out = self._refuse(describe(intent))
        self._publish(Notice(severity="error", text=out.message))  # answered at once, as a live fleet does
        return out

    async def smoke(self, ref: str, *_: object, **__: object) -> SmokeResult:
        """A failed SmokeResult whatever the settings: nothing is sent from here."""
        return failed(ref, f"this view follows {self.source_label}: no request sent from it")

    async def run_bench(self, req: BenchRequest) -> Outcome:
        """Refused whatever the request."""
        return self._refuse("bench")

    async def doctor(self, host: str) -> DoctorReport:
        return DoctorReport(
            host=host,
            findings=[
                Finding(
                    check="doctor",
                    status="warn",
                    evidence=f"this view follows {self.source_label}: no checks ran from it",
                    fix=f"run `ddtree-tui doctor {host}` on a live fleet",
                )
            ],
        )

    async def reload_profiles(self) -> list[str]:
        raise RuntimeError(f"this view follows {self.source_label}: profiles are not reloaded here")


class _IntentsOverHttp:
    """AttachedFleet's intents: POSTed to the collector's /intents/VERB (works when it runs --intents)."""

    url: str
    _headers: dict[str, str]

    if TYPE_CHECKING:  # PubSub's, in AttachedFleet (declared for the mixin's types only: not in the MRO)

        def publish(self, ev: Any) -> None: ...

    async def _post(self, verb: str, body: dict[str, Any], what: str) -> Outcome:
        try:
            async with (
                http.session(headers=self._headers, timeout=10.0, read_timeout=900.0) as c,
                c.post(f"{self.url}/intents/{verb}", json=body) as r,
            ):
                status = r.status
                raw = await http.read_body(r, INTENT_REPLY_CAP)
        except http.REQUEST_ERRORS as e:
            return Outcome.refused(f"{what}: the collector at {self.url} did not answer: {_why(e)}")
        try:
            data = json.loads(raw)
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        msg = str(data.get("message") or f"HTTP {status}")
        if status == 401:
            return Outcome.refused(f"{what}: {msg}", "attach with --token-file FILE")
        return Outcome(ok=bool(data.get("ok")) and status == 200, message=msg,
                       suggestion=data.get("suggestion"), invalid=status == 400)  # fmt: skip

    async def do(self, intent: AnyIntent) -> Outcome:
        """POST /intents/KIND with the intent's body (the collector parses it into the same union); the
        answer is published as a Notice, as a live fleet reports its results, so a face shows it."""
        out = await self._post(intent.kind, intent_body(intent), describe(intent))
        text = out.message + (f" ({out.suggestion})" if out.suggestion and not out.ok else "")
        self.publish(Notice(severity="information" if out.ok else "error", text=text))
        return out

    async def run_bench(self, req: BenchRequest) -> Outcome:
        """The request as it is, to the collector's fleet (POST /intents/bench)."""
        return await self._post("bench", req.model_dump(mode="json", exclude_defaults=True), "bench")


class AttachedFleet(_IntentsOverHttp, FollowerFleet):
    """A fleet fed by a collector over HTTP; its intents go to the collector."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        refresh_s: float = 5.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 5.0,
        timeout: float = 5.0,
    ) -> None:
        super().__init__()
        self.url = url.rstrip("/")
        self.source_label = f"the collector at {self.url}"
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._token = bool(token)
        self.refresh_s = refresh_s
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.connected = False
        self.lost_at: float | None = None  # when the link went down (None while up or before the first try)
        self.last_error: str | None = None
        self.connects = 0  # successful (re)connections, for tests

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"attach {self.url}")

    def banner(self) -> str:
        """One line for the header: where the data comes from and whether the link is up."""
        if self.connected:
            return f"ATTACHED to {self.url}"
        if self.lost_at is None:
            return f"connecting to the collector at {self.url} …"
        at = time.strftime("%H:%M:%S", time.localtime(self.lost_at))
        return f"COLLECTOR LOST at {at} · {self.url} · showing data as of then · reconnecting …"

    def read_only_reason(self) -> str | None:
        """Attached without a token the collector refuses every intent: read-only, said at once."""
        if self._token:
            return None
        return f"attached to {self.url} without a token: read-only (attach with --token-file FILE to act)"

    async def _run(self) -> None:
        backoff = self.backoff_initial
        async with http.session(headers=self._headers, timeout=self.timeout) as client:
            while True:
                try:
                    await self._session(client)
                    err = "the collector closed the event stream"
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    err = _why(e)
                was_up = self.connected
                if was_up or self.lost_at is None:
                    self._lost(err)
                else:
                    self.last_error = err
                backoff = self.backoff_initial if was_up else min(backoff * 2, self.backoff_max)
                await asyncio.sleep(backoff)

    async def _session(self, client: aiohttp.ClientSession) -> None:
        """One connection: the event stream is opened first, then the snapshot is read (so nothing falls in
        between; events older than the snapshot are not folded in again), then events until the stream ends,
        with a full refresh every `refresh_s`."""
        events_timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=30.0)
        async with client.get(f"{self.url}/events", timeout=events_timeout) as r:
            if r.status != 200:
                raise RuntimeError(f"/events answered HTTP {r.status}")
            await self._fetch_snapshot(client, history=True)
            self._up()
            refresher = asyncio.create_task(self._refresh_loop(client))
            try:
                await self._fetch_logs(client)
                buf: list[str] = []
                async for line in http.iter_lines(r, EVENT_CAP):
                    if line:
                        buf.append(line)
                        continue
                    if buf:
                        _, data = parse_sse(buf)
                        buf = []
                        ev = decode_event(data) if data else None
                        if ev is not None:
                            self._apply(ev)
                            self._publish(ev)
            finally:
                refresher.cancel()
                with contextlib.suppress(BaseException):
                    await refresher

    async def _fetch_snapshot(self, client: aiohttp.ClientSession, history: bool = False) -> None:
        self._snap = await _read_snapshot(client, self.url)
        self._floor = self._snap.ts
        for h in self._snap.hosts if history else ():
            for g in h.gpus:
                if g.util_gpu is not None:
                    self._hist(h.name, g.index).append(float(g.util_gpu))

    async def _refresh_loop(self, client: aiohttp.ClientSession) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            with contextlib.suppress(Exception):
                await self._fetch_snapshot(client)
                for h in self._snap.hosts:  # the app repaints on host events
                    self._publish(HostStateChanged(host=h.name, status=_conn_of(h)))

    async def _fetch_logs(self, client: aiohttp.ClientSession) -> None:
        """The tail the collector keeps for each service (the first 50), so a log pane is not empty."""
        refs = [f"{h.name}/{s.name}" for h in self._snap.hosts for s in h.services][:50]
        for ref in refs:
            with contextlib.suppress(Exception):
                async with client.get(f"{self.url}/logs", params={"ref": ref}) as r:
                    if r.status != 200:
                        continue
                    body: Any = await http.read_json(r, http.BODY_CAP)  # a bad shape: skipped, as before
                    lines = body.get("lines", [])
                buf = self._logs.setdefault(ref, deque(maxlen=LOG_LINES_KEPT))
                buf.clear()
                buf.extend(str(x) for x in lines)

    def _up(self) -> None:
        was_lost = self.lost_at is not None
        self.connected = True
        self.lost_at = None
        self.last_error = None
        self.connects += 1
        if was_lost:
            self._publish(Notice(severity="information", text=f"collector at {self.url} is back"))
        for h in self._snap.hosts:
            self._publish(HostStateChanged(host=h.name, status=_conn_of(h)))

    def _lost(self, err: str) -> None:
        self.connected = False
        self.lost_at = time.time()
        self.last_error = err
        at = time.strftime("%H:%M:%S", time.localtime(self.lost_at))
        hosts = [  # not "connected" any more: nothing here knows how the host is now
            h.model_copy(
                update={"state": "disconnected", "error": f"collector unreachable since {at}: {err}"}
            )
            for h in self._snap.hosts
        ]
        self._snap = self._snap.model_copy(update={"hosts": hosts})
        self._publish(
            Notice(
                severity="error",
                text=f"collector at {self.url} lost: {err}; showing the last data, reconnecting",
            )
        )
        for h in self._snap.hosts:
            self._publish(HostStateChanged(host=h.name, status=_conn_of(h)))

    async def do(self, intent: AnyIntent) -> Outcome:
        """The collector's fleet carries it out; after a todo edit its list is read back at once (the full
        refresh is seconds away), so the pane shows what the file now holds."""
        res = await super().do(intent)
        if res.ok and isinstance(intent, Todo):
            with contextlib.suppress(*http.REQUEST_ERRORS, ValueError, RuntimeError):
                async with http.session(headers=self._headers, timeout=self.timeout) as c:
                    todos = (await _read_snapshot(c, self.url)).todos
                self._snap = self._snap.model_copy(update={"todos": todos})
                self._publish(TodoChanged())
        return res


def label_gpus(h: HostView) -> HostView:
    """As the Fleet does for sources without pids of ours (a replay, Prometheus): each GPU names the running
    services configured on it."""
    if h.telemetry.source not in ("replay", "prometheus"):
        return h
    gpus = []
    for g in h.gpus:
        names = [
            s.name for s in h.services if s.state in ("starting", "ready", "unhealthy") and g.index in s.gpus
        ]
        gpus.append(g.model_copy(update={"service": ", ".join(names) or None}))
    return h.model_copy(update={"gpus": gpus})


def _conn_of(h: HostView) -> Any:
    from ddtree_tui.model.snapshot import ConnStatus

    return ConnStatus(state=h.state, error=h.error, next_retry_at=h.next_retry_at)


async def _read_snapshot(client: aiohttp.ClientSession, url: str) -> FleetSnapshot:
    """The collector's /snapshot; RuntimeError for another status, BodyTooLarge over SNAPSHOT_CAP."""
    async with client.get(f"{url}/snapshot") as r:
        if r.status != 200:
            raise RuntimeError(f"/snapshot answered HTTP {r.status}")
        return FleetSnapshot.model_validate_json(await http.read_body(r, SNAPSHOT_CAP))


def _why(e: BaseException) -> str:
    return http.describe(e)

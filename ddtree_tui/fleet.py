"""The core: the single owner of live state. It owns each host's transport, telemetry sampler and service
manager, the todo store and benchmark runs; it publishes immutable snapshots and a stream of events.

The UI and the headless reporters subscribe; they never reach a host themselves. Data flows one way:
transport -> telemetry/services/bench -> fleet -> ui or reporter.

Over 600 lines because it is the one door: every intent (lifecycle, logs, patches, smoke, bench, holds, todos)
is a short method here that hands off to its package; the work itself lives there.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from ddtree_tui.alerts import run_alerts
from ddtree_tui.bench.history import DEFAULT_HISTORY
from ddtree_tui.bench.smoke import SmokeResult, failed, smoke_request
from ddtree_tui.benchdesk import BenchDesk
from ddtree_tui.config import HostProfile, ProfileError, ServiceSpec, find_service, load_profiles
from ddtree_tui.doctor import DoctorReport, run_doctor
from ddtree_tui.events import (
    FleetEvent,
    GpuSampleEvent,
    HostStateChanged,
    LogLine,
    Notice,
    ServiceStateChanged,
    TodoChanged,
)
from ddtree_tui.pubsub import PubSub
from ddtree_tui.services import argcheck
from ddtree_tui.services.argcheck import ArgCheck
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.services.lifecycle import ActionResult, ServiceHeld, ServiceManager, move_service
from ddtree_tui.services.patches import (
    PatchAction,
    PatchReport,
    PatchSet,
    apply_patch,
    patch_status,
    revert_patch,
)
from ddtree_tui.state import (
    ConnStatus,
    FleetSnapshot,
    GpuSample,
    HostSample,
    HostView,
    ServiceStatus,
    TelemetryStatus,
)
from ddtree_tui.sweep import hold
from ddtree_tui.telemetry.sampler import HostTelemetry
from ddtree_tui.todo import DEFAULT_TODOS, ItemEvidence, TodoEdit, TodoError, TodoResult, TodoStore, TodoView
from ddtree_tui.todo.evidence import RunsContext, apply_auto_complete, evaluate, history_runs, todo_view
from ddtree_tui.transport import Transport, make_transport

if TYPE_CHECKING:
    from ddtree_tui.bench.models import BenchRequest, BenchRun, BenchTarget, ShapeRequest
    from ddtree_tui.bench.results import AnyRun, ShapeRun

log = logging.getLogger(__name__)

LOG_LINES_KEPT = 500
QUEUE_SIZE = 2000


class _Host:
    """Everything the fleet keeps for one host."""

    def __init__(self, profile: HostProfile, transport: Transport) -> None:
        self.profile = profile
        self.transport = transport
        self.conn: ConnStatus = transport.status
        self.host_sample: HostSample | None = None
        self.gpus: list[GpuSample] = []
        self.telemetry_status = TelemetryStatus()
        self.telemetry: HostTelemetry | None = None
        self.services: ServiceManager = None  # type: ignore[assignment]  # set by _start_host before any use
        self.statuses: dict[str, ServiceStatus] = {}
        self.extra_specs: dict[str, ServiceSpec] = {}  # services moved here from another host
        self.tasks: list[asyncio.Task[None]] = []
        self.sampled = asyncio.Event()


class FleetOptions(TypedDict, total=False):
    """How a fleet runs, for `Fleet(...)` and `Fleet.open(...)` alike (the constructor's defaults apply)."""

    todos_path: Path | None
    history_path: Path | None
    demo: bool
    telemetry: bool
    probe_interval: float
    auto_complete_todos: bool | None
    watch: bool


class Fleet(PubSub[FleetEvent]):
    def __init__(
        self,
        profiles: Sequence[HostProfile],
        *,
        todos_path: Path | None = None,
        history_path: Path | None = None,
        demo: bool = False,
        telemetry: bool = True,
        probe_interval: float = 2.0,
        auto_complete_todos: bool | None = None,
        watch: bool = True,
    ) -> None:
        self._profiles = list(profiles)
        self._watch = watch  # False: a one-shot mode; services are probed when asked, not watched
        self.demo = demo
        self.history_path = Path(history_path or DEFAULT_HISTORY)
        self.todos_path = Path(todos_path or DEFAULT_TODOS)
        self._telemetry_enabled = telemetry
        self._probe_interval = probe_interval
        self.auto_complete_todos = auto_complete_todos
        self._hosts: dict[str, _Host] = {}
        PubSub.__init__(self, QUEUE_SIZE)
        self._logs: dict[str, deque[str]] = {}
        self._started = False
        self._bg: list[asyncio.Task[None]] = []
        self._launched: set[str] = set()  # refs we launched in this session (demo cleanup)
        self.bench = BenchDesk(self)  # benchmarks: targets, runs, history (benchdesk.py)
        self._evidence: list[ItemEvidence] = []
        # the todo store: only this fleet writes it while it runs (todo_apply, the todo loop's auto-complete),
        # one change at a time under _todo_lock, saved off the event loop; readers get _todo_view (snapshot)
        self.todos = TodoStore(self.todos_path)
        self.todos.load()
        self._todo_lock = asyncio.Lock()
        self._todo_view: TodoView = todo_view(self.todos)

    # --- lifecycle -----------------------------------------------------------------------------------------
    def profiles(self) -> list[HostProfile]:
        return list(self._profiles)

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        for prof in self._profiles:
            await self._start_host(prof)
        self._bg.append(asyncio.create_task(self._todo_loop(), name="todo-loop"))
        self._bg.append(asyncio.create_task(self._guard(lambda: run_alerts(self), "alerts"), name="alerts"))

    async def _start_host(self, prof: HostProfile) -> None:
        transport = make_transport(prof)
        h = _Host(prof, transport)
        self._hosts[prof.name] = h
        transport.add_listener(functools.partial(self._on_conn, prof.name))
        await transport.start()
        h.services = ServiceManager(
            transport,
            prof,
            on_status=functools.partial(self._on_service, prof.name),
            on_log=functools.partial(self._on_log, prof.name),
            probe_interval=self._probe_interval,
        )
        for st in h.services.statuses():
            h.statuses[st.name] = st
        if self._watch:
            await h.services.start()
        if self._telemetry_enabled:
            h.telemetry = HostTelemetry(
                transport,
                prof,
                on_update=functools.partial(self._on_sample, prof.name),
            )
            h.tasks.append(asyncio.create_task(self._guard(h.telemetry.run, f"telemetry {prof.name}")))

    async def _guard(self, run: Callable[[], Awaitable[None]], what: str) -> None:
        """A background task whose crash is reported, never silent and never fatal to the app."""
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # pragma: no cover - reported to the user
            log.exception("%s failed", what)
            self._publish(Notice(severity="error", text=f"{what} stopped: {e}"))

    async def stop(self) -> None:
        if self.demo:
            for ref in list(self._launched):
                with contextlib.suppress(Exception):
                    await self.kill(ref)
        for t in self._bg:
            t.cancel()
        for t in self._bg:
            with contextlib.suppress(BaseException):
                await t
        for h in self._hosts.values():
            await self._stop_host(h)
        self._started = False

    async def _stop_host(self, h: _Host) -> None:
        """Stop watching a host (its services keep running; their pidfiles find them again)."""
        for t in h.tasks:
            t.cancel()
        for t in h.tasks:
            with contextlib.suppress(BaseException):
                await t
        if h.services is not None:
            with contextlib.suppress(Exception):
                await h.services.stop()
        with contextlib.suppress(Exception):
            await h.transport.close()

    async def reload_profiles(self, profiles: Sequence[HostProfile] | None = None) -> list[str]:
        """Pick up edited profiles without a restart: re-read each profile's file (or take `profiles`),
        restart the watchers of hosts whose profile changed, add new hosts, drop removed ones. Running
        services are never touched. A bad profile changes nothing and is reported. Returns what changed."""
        if profiles is None:
            sources = [p.source for p in self._profiles]
            if any(src is None for src in sources):
                raise ValueError("these profiles were not loaded from files; pass the new profiles")
            try:
                profiles = load_profiles([str(src) for src in sources])
            except ProfileError as e:
                self._publish(Notice(severity="error", text=f"profiles not reloaded: {e}"))
                raise
        new = {p.name: p for p in profiles}
        changes: list[str] = []
        for name in list(self._hosts):
            if name not in new:
                await self._stop_host(self._hosts.pop(name))
                changes.append(f"removed {name}")
        for prof in profiles:
            old = self._hosts.get(prof.name)
            if old is not None and old.profile == prof:
                continue
            extra = old.extra_specs if old is not None else {}
            if old is not None:
                await self._stop_host(old)
            await self._start_host(prof)
            self._hosts[prof.name].extra_specs.update(extra)
            changes.append(f"{'reloaded' if old is not None else 'added'} {prof.name}")
        self._profiles = list(profiles)
        text = "profiles reloaded: " + (", ".join(changes) if changes else "nothing changed")
        self._publish(Notice(severity="information", text=text))
        for h in self._hosts.values():
            self._publish(HostStateChanged(host=h.profile.name, status=h.conn))
        return changes

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, profiles: Sequence[HostProfile], **options: Unpack[FleetOptions]
    ) -> AsyncIterator[Fleet]:
        """The fleet's whole lifetime in one block: `async with Fleet.open(profiles) as fleet:` starts every
        host's watchers and always stops them (and, in the demo, kills what this session launched), even
        when the block raises or is cancelled. `watch=False` (one-shot headless modes) starts no service
        watcher, log follower or health prober: a wait polls, a log follow opens its own tail."""
        fleet = cls(profiles, **options)
        try:
            await fleet.start()
            yield fleet
        finally:
            await fleet.stop()

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_settled(self, timeout: float) -> None:
        """Wait until every host has connected and sent a first sample (or the timeout passes)."""
        deadline = time.monotonic() + timeout

        async def one(h: _Host) -> None:
            left = max(0.0, deadline - time.monotonic())
            ok = await h.transport.wait_connected(left)
            if ok and self._telemetry_enabled:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        await h.sampled.wait()
                if not h.sampled.is_set():
                    ts = h.telemetry_status
                    why = f"no GPU sample within the {timeout:.0f} s timeout"
                    note = f"{ts.note}; {why}" if ts.note else why
                    h.telemetry_status = ts.model_copy(update={"note": note})
            if ok and h.services is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                        await h.services.refresh()

        await asyncio.gather(*(one(h) for h in self._hosts.values()))

    # --- events --------------------------------------------------------------------------------------------
    # subscribe / unsubscribe / publish: PubSub (a slow reader loses the oldest events, the core never waits)

    def _on_conn(self, host: str, st: ConnStatus) -> None:
        h = self._hosts.get(host)
        if h is None:
            return
        h.conn = st
        if st.state != "connected":
            for name, s in list(h.statuses.items()):
                if s.state not in ("unknown",):
                    h.statuses[name] = s.model_copy(update={"state": "unknown", "detail": st.error})
        self._publish(HostStateChanged(host=host, status=st))

    def _on_sample(
        self, host: str, hs: HostSample | None, gpus: list[GpuSample], ts: TelemetryStatus
    ) -> None:
        h = self._hosts.get(host)
        if h is None:
            return
        h.host_sample, h.gpus, h.telemetry_status = hs, gpus, ts
        if h.telemetry is None or h.telemetry.settled:
            h.sampled.set()  # not on a first `stale` line without GPU rows: `status` would report no GPUs
        self._publish(GpuSampleEvent(host=host, host_sample=hs, gpus=gpus, telemetry=ts))

    def _on_service(self, host: str, st: ServiceStatus) -> None:
        h = self._hosts.get(host)
        if h is None:
            return
        prev = h.statuses.get(st.name)
        h.statuses[st.name] = st
        if h.telemetry is not None and h.services is not None:
            with contextlib.suppress(Exception):
                h.telemetry.set_service_pids(h.services.service_pids())
        if prev is None or prev != st:
            self._publish(ServiceStateChanged(host=host, status=st))

    def _on_log(self, host: str, svc: str, line: str) -> None:
        ref = f"{host}/{svc}"
        buf = self._logs.setdefault(ref, deque(maxlen=LOG_LINES_KEPT))
        buf.append(line)
        self._publish(LogLine(host=host, service=svc, line=line))

    # --- reads ---------------------------------------------------------------------------------------------
    def snapshot(self) -> FleetSnapshot:
        hosts: list[HostView] = []
        for h in self._hosts.values():
            services = [h.statuses[n] for n in self._service_names(h) if n in h.statuses]
            gpus = self._label_gpus(h, services)
            hosts.append(
                HostView(
                    name=h.profile.name,
                    address=h.profile.address,
                    state=h.conn.state,
                    error=h.conn.error,
                    next_retry_at=h.conn.next_retry_at,
                    host=h.host_sample,
                    gpus=gpus,
                    telemetry=h.telemetry_status,
                    services=services,
                )
            )
        return FleetSnapshot(ts=time.time(), hosts=hosts, todos=self._todo_view)

    def _service_names(self, h: _Host) -> list[str]:
        return [s.name for s in h.profile.service] + [
            n for n in h.extra_specs if h.profile.get_service(n) is None
        ]

    def _label_gpus(self, h: _Host, services: list[ServiceStatus]) -> list[GpuSample]:
        """A replay or Prometheus has no pids of ours: say which running service is configured on each GPU."""
        if h.telemetry_status.source not in ("replay", "prometheus"):  # no pids of ours in these
            return h.gpus
        out = []
        for g in h.gpus:
            names = [
                s.name
                for s in services
                if s.state in ("starting", "ready", "unhealthy") and g.index in s.gpus
            ]
            label = ", ".join(names) or None
            out.append(g if g.service == label else g.model_copy(update={"service": label}))
        return out

    def gpu_history(self, host: str, gpu_index: int, metric: str = "util_gpu") -> list[float]:
        h = self._hosts.get(host)
        if h is None or h.telemetry is None:
            return []
        try:
            return list(h.telemetry.history.series(gpu_index, metric))
        except (KeyError, IndexError):
            return []

    def log_lines(self, ref: str) -> list[str]:
        return list(self._logs.get(ref, ()))

    def transport(self, host: str) -> Transport:
        return self._host(host).transport

    def _host(self, name: str) -> _Host:
        h = self._hosts.get(name)
        if h is None:
            raise ValueError(f"no host '{name}' (known: {', '.join(self._hosts) or 'none'})")
        return h

    def _split(self, ref: str) -> tuple[_Host, str]:
        if "/" not in ref:
            raise ValueError(f"expected HOST/SVC, got {ref!r}")
        host, svc = ref.split("/", 1)
        h = self._host(host)
        if h.profile.get_service(svc) is None and svc not in h.extra_specs:
            find_service(self._profiles, ref)  # raises with the known names
        return h, svc

    # --- intents -------------------------------------------------------------------------------------------
    async def _lifecycle(
        self, verb: str, ref: str, *, force: bool = False, timeout: float | None = None
    ) -> ActionResult:
        """launch / kill / restart one service; remember what we started so the demo can clean up."""
        h, svc = self._split(ref)
        held = self._foreign_hold(ref, verb)
        if held is not None:
            return held
        if verb == "launch":
            res = await h.services.launch(svc, h.extra_specs.get(svc), force=force)
        elif verb == "kill":
            res = await h.services.kill(svc, timeout=timeout)
        else:
            res = await h.services.restart(svc, force=force)
        if res.ok:
            (self._launched.discard if verb == "kill" else self._launched.add)(ref)
        self._notice(f"{verb} {ref}", res)
        return res

    async def launch(self, ref: str, *, force: bool = False) -> ActionResult:
        """`force`: launch even when the host's SGLang parser rejects the command line."""
        return await self._lifecycle("launch", ref, force=force)

    async def kill(self, ref: str, *, timeout: float | None = None) -> ActionResult:
        """`timeout`: seconds before SIGKILL (default: the service's kill_timeout)."""
        return await self._lifecycle("kill", ref, timeout=timeout)

    async def restart(self, ref: str, *, force: bool = False) -> ActionResult:
        return await self._lifecycle("restart", ref, force=force)

    async def move(self, ref: str, to_host: str, *, startup_timeout: float | None = None) -> ActionResult:
        """Launch the service on `to_host`, wait until ready (`startup_timeout`, default the spec's), then
        kill the old one."""
        src, svc = self._split(ref)
        held = self._foreign_hold(ref, "move")
        if held is not None:
            return held
        dst = self._host(to_host)
        spec = src.profile.get_service(svc) or src.extra_specs[svc]
        if dst.profile.get_service(svc) is None:
            dst.extra_specs[svc] = spec
        if startup_timeout is None:
            res = await move_service(src.services, dst.services, svc)
        else:  # this move only: the source manager's spec is put back afterwards
            own = src.services._svc(svc)
            before = own.spec
            own.spec = before.model_copy(update={"startup_timeout": float(startup_timeout)})
            try:
                res = await move_service(src.services, dst.services, svc)
            finally:
                own.spec = before
        if res.ok:
            self._launched.discard(ref)
            self._launched.add(f"{to_host}/{svc}")
        self._notice(f"move {ref} -> {to_host}", res)
        return res

    # --- holds and one-off specs (the tuning lab) -----------------------------------------------------------
    def hold(self, ref: str, owner: str) -> None:
        """Reserve a service for `owner` (a sweep): launch/kill/restart/move of it are refused for others.
        Raises ServiceHeld when someone else holds it."""
        h, svc = self._split(ref)
        h.services.hold(svc, owner)
        try:
            hold.acquire(ref, owner)  # other ddtree-tui processes on this machine see it too
        except ValueError as e:
            h.services.release(svc, owner)
            raise ServiceHeld(str(e)) from None
        self._publish(Notice(severity="information", text=f"{ref} is held by {owner}"))

    def release(self, ref: str, owner: str) -> None:
        h, svc = self._split(ref)
        h.services.release(svc, owner)
        hold.release(ref)

    def _foreign_hold(self, ref: str, verb: str) -> ActionResult | None:
        """An ActionResult refusing `verb` when a sweep in another process holds the service."""
        who = hold.holder(ref)
        if who is None:
            return None
        h, svc = self._split(ref)
        res = ActionResult(
            ok=False,
            message=f"refused to {verb} {ref}: it is held by {who}; nothing was done",
            status=h.services.status(svc),
            suggestion="wait for the sweep to finish, or stop it (it puts the service back as the profile has it)",
        )
        self._notice(f"{verb} {ref}", res)
        return res

    def held_by(self, ref: str) -> str | None:
        h, svc = self._split(ref)
        return h.services.held_by(svc)

    def held_elsewhere(self, ref: str) -> str | None:
        """Who holds `ref` from another process on this machine (a sweep), or None."""
        self._split(ref)
        return hold.holder(ref)

    async def reach(self, host: str) -> str | None:
        """Wait for the host's connection (its connect_timeout and 2 s); None once connected, else why not."""
        h = self._host(host)
        if await h.transport.wait_connected(h.profile.connect_timeout + 2):
            return None
        err = h.transport.status.error or "not connected"
        return f"cannot reach {h.profile.name} ({h.profile.address}): {err}"

    def spec_of(self, ref: str) -> tuple[HostProfile, ServiceSpec]:
        """The profile and the service's spec as the profile has it (no overrides)."""
        h, svc = self._split(ref)
        return h.profile, h.profile.get_service(svc) or h.extra_specs[svc]

    def current_spec(self, ref: str) -> ServiceSpec:
        """The spec the service was last launched with (overrides included)."""
        h, svc = self._split(ref)
        return h.services.spec(svc)

    async def preflight(self, ref: str, spec: ServiceSpec) -> ArgCheck | None:
        """The host parser's verdict on `spec`'s launch line (an ArgCheck, or None for non-sglang)."""
        h, _svc = self._split(ref)
        return await argcheck.preflight(h.transport, h.profile, spec, build_launch(h.profile, spec))

    async def deploy(self, ref: str, spec: ServiceSpec, *, holder: str | None = None) -> ActionResult:
        """Kill the service (if running) and launch it with `spec` (an override of its profile spec; the
        profile file is never edited). Returns the launch's ActionResult; wait with `wait_service`."""
        h, svc = self._split(ref)
        k = await h.services.kill(svc, holder=holder)
        if not k.ok:
            self._notice(f"deploy {ref}", k)
            return k
        res = await h.services.launch(svc, spec, holder=holder)
        if res.ok:
            self._launched.add(ref)
        self._notice(f"deploy {ref}", res)
        return res

    async def wait_service(self, ref: str, states: set[str], timeout: float) -> ServiceStatus:
        h, svc = self._split(ref)
        return await h.services.wait_state(svc, states, timeout)

    async def logs(self, ref: str, lines: int = 30) -> list[str]:
        """The last `lines` lines of the service's log, read from the host now (secrets masked)."""
        h, svc = self._split(ref)
        return list(await h.services.read_log(svc, lines))

    async def follow_log(self, ref: str, on_gap: Callable[[str], None] | None = None) -> AsyncIterator[str]:
        """New lines of the service's log as they come, across dropped connections (`on_gap` hears of them)."""
        h, svc = self._split(ref)
        async for line in h.services.follow_log(svc, on_gap=on_gap):
            yield line

    async def patches(self, action: PatchAction, host: str, sets: Sequence[PatchSet]) -> list[PatchReport]:
        """`status` / `apply` / `revert` each patch set on `host`'s SGLang, over its open transport."""
        h = self._host(host)
        fn = {"status": patch_status, "apply": apply_patch, "revert": revert_patch}[action]
        return [await fn(h.transport, h.profile, ps) for ps in sets]

    def _notice(self, what: str, res: ActionResult) -> None:
        text = f"{what}: {res.message}" + (f" ({res.suggestion})" if res.suggestion else "")
        self._publish(Notice(severity="information" if res.ok else "error", text=text))

    async def doctor(self, host: str) -> DoctorReport:
        """Preflight checks of one host over its already-open transport (a DoctorReport)."""
        h = self._host(host)
        return await run_doctor(h.transport, h.profile)

    # --- benchmark -----------------------------------------------------------------------------------------
    async def smoke(
        self,
        ref: str,
        prompt: str = "Say hello in one short sentence.",
        max_new_tokens: int = 32,
        timeout: float = 30.0,
        api: str = "generate",
        model: str | None = None,
    ) -> SmokeResult:
        """One short /generate request (the post-deploy curl), bounded by `timeout` including the port
        forward; the result (a SmokeResult) is also published as a Notice. Raises only for a bad ref."""
        h, svc = self._split(ref)
        spec = h.profile.get_service(svc) or h.extra_specs[svc]
        deadline = time.monotonic() + timeout
        try:
            async with asyncio.timeout(timeout):
                base = await h.services.base_url(svc)
        except TimeoutError:
            res = failed(ref, f"no route to the service within {timeout:g} s")
        except Exception as e:
            res = failed(ref, f"port forward failed: {e}")
        else:
            res = await smoke_request(
                ref,
                base,
                algorithm=spec.algorithm,
                mode=spec.display_mode,
                prompt=prompt,
                max_new_tokens=max_new_tokens,
                timeout=max(0.1, deadline - time.monotonic()),
                api=api,
                model=model or spec.served_model_name,
            )
        st = h.statuses.get(svc)
        left = min(5.0, deadline - time.monotonic())
        # a fresh fleet (the headless mode) has not probed yet: ask now, so the error says stopped/crashed
        if not res.ok and (st is None or st.state == "unknown") and left > 0.1:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(left):
                    await h.services.refresh()
            st = h.statuses.get(svc)
        if not res.ok and st is not None and st.state != "ready":
            res = res.model_copy(update={"error": f"service is {st.state}; {res.error}"})
        self._publish(Notice(severity="information" if res.ok else "error", text=res.line()))
        return res

    async def service_url(self, ref: str) -> str:
        """http://127.0.0.1:PORT reaching the service (its port forwarded over the host's transport)."""
        h, svc = self._split(ref)
        return await h.services.base_url(svc)

    async def bench_targets(self, refs: Sequence[str]) -> list[BenchTarget]:
        return await self.bench.bench_targets(refs)

    async def run_bench(self, req: BenchRequest, stop: asyncio.Event | None = None) -> BenchRun:
        return await self.bench.run_bench(req, stop)

    async def run_load_shape(self, req: ShapeRequest, stop: asyncio.Event | None = None) -> ShapeRun:
        return await self.bench.run_shape(req, stop)

    def bench_history(self) -> list[AnyRun]:
        return self.bench.history()

    # --- todos ---------------------------------------------------------------------------------------------
    def todo_evidence(self) -> list[ItemEvidence]:
        return list(self._evidence)

    async def refresh_todos(self) -> bool:
        """Reload an externally changed file, re-evaluate evidence, auto-complete what the user allows;
        True when anything changed. Serialised with the intents (one writer)."""
        async with self._todo_lock:
            changed = await self._refresh_todos_locked()
        if changed:
            self._publish(TodoChanged())
        return changed

    async def _refresh_todos_locked(self) -> bool:
        changed = False
        try:
            changed = await asyncio.to_thread(self.todos.reload_if_changed)
        except OSError as e:  # pragma: no cover - reported
            self._publish(Notice(severity="warning", text=f"todo file not re-read: {e}"))
        runs = await asyncio.to_thread(history_runs, self.history_path)
        ctx = RunsContext(self.snapshot(), runs)
        ev = evaluate(self.todos.items, ctx)
        if not self.todos.read_only:
            # None: the user's own switch in the todo file decides (off unless they turned it on)
            done = apply_auto_complete(self.todos, ev, allowed=self.auto_complete_todos, save=False)
            if done:
                changed = True
                try:
                    await asyncio.to_thread(self.todos.save)
                except TodoError as e:  # kept in memory (as before): the next save carries it
                    self._publish(Notice(severity="warning", text=f"todo auto-complete not saved: {e}"))
                ev = evaluate(self.todos.items, ctx)
        if ev != self._evidence:
            changed = True
        self._evidence = ev
        if changed:
            self._todo_view = todo_view(self.todos, ev)
        return changed

    async def _todo_loop(self) -> None:
        while True:
            try:
                await self.refresh_todos()
            except Exception as e:  # pragma: no cover - reported
                self._publish(Notice(severity="warning", text=f"todo check failed: {e}"))
            await asyncio.sleep(1.0)

    async def todo_apply(self, edit: TodoEdit) -> TodoResult:
        """Make one change to the todo list and save it (merged with any edit made on disk meanwhile), in
        turn with the auto-complete merges; publishes TodoChanged. A failed save changes nothing."""
        async with self._todo_lock:
            if self.todos.read_only:
                return TodoResult(
                    ok=False,
                    message=f"todo {edit.action}: the todo file is read-only: {self.todos.error}",
                    suggestion="fix the file (or restore its .bak); it is re-read every second",
                )
            before = self.todos.checkpoint()
            try:
                res = self.todos.apply(edit)
            except TodoError as e:
                return TodoResult(ok=False, message=f"todo {edit.action}: {e}", invalid=True)
            try:
                await asyncio.to_thread(self.todos.save)
            except TodoError as e:
                self.todos.restore(before)
                return TodoResult(ok=False, message=f"todo {edit.action}: {e}")
            await self._refresh_todos_locked()
            self._todo_view = todo_view(self.todos, self._evidence)
        self._publish(TodoChanged())
        return res


async def collect_snapshot(
    profiles: Sequence[HostProfile], timeout: float = 8.0, *, telemetry: bool = True
) -> FleetSnapshot:
    """One snapshot of every host (`status`, `todo check`): connect, wait for a first sample and service
    probe, then let go."""
    async with Fleet.open(profiles, telemetry=telemetry, auto_complete_todos=False) as fleet:
        await fleet.wait_settled(timeout)
        return fleet.snapshot()

"""`Fleet`: the door into the core and the single owner of live state. It keeps the host registry, publishes
immutable snapshots and a stream of events, and carries out intents: `do(intent) -> Outcome` is the one
dispatch of the typed intent vocabulary (model/intents.py). The work is in small desks it composes: hosts
(registry, start/stop/reload), services (lifecycle, move, holds, deploy, logs, patches, doctor, smoke),
benching (targets, runs, history) and todos. The other public methods are thin delegations kept for the code
that reads through them (the sweep, the headless modes).
Data flows one way: transport -> telemetry/services/bench -> fleet -> ui, collector or reporter."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from ddtree_tui.alerts import run_alerts
from ddtree_tui.bench.history import DEFAULT_HISTORY
from ddtree_tui.bench.smoke import SmokeResult
from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.fleet import snapshot as snap
from ddtree_tui.fleet.benching import BenchDesk
from ddtree_tui.fleet.hosts import Hosts
from ddtree_tui.fleet.services import SMOKE_PROMPT, Ref, ServiceDesk
from ddtree_tui.fleet.todos import Todos
from ddtree_tui.lib.pubsub import PubSub
from ddtree_tui.lib.tasks import cancel_and_wait
from ddtree_tui.model.events import FleetEvent, Notice
from ddtree_tui.model.identity import TargetIdentity
from ddtree_tui.model.intents import AnyIntent, Bench, Kill, Launch, Move, Outcome, Restart, Todo
from ddtree_tui.model.snapshot import ActionResult, FleetSnapshot, ServiceStatus
from ddtree_tui.model.todo import ItemEvidence, TodoEdit, TodoResult
from ddtree_tui.todo import DEFAULT_TODOS, TodoStore
from ddtree_tui.transport import Transport

if TYPE_CHECKING:
    from ddtree_tui.bench.models import BenchRequest, BenchRun, BenchTarget, ShapeRequest
    from ddtree_tui.bench.results import AnyRun, ShapeRun
    from ddtree_tui.bench.windows import CacheFlush
    from ddtree_tui.doctor import DoctorReport  # types only: the doctor, the preflight and the patches are
    from ddtree_tui.services.argcheck import ArgCheck  # imported by the desk when asked for (issue 24)
    from ddtree_tui.services.patches import PatchAction, PatchReport, PatchSet

log = logging.getLogger(__name__)

QUEUE_SIZE = 2000


class FleetOptions(TypedDict, total=False):
    """How a fleet runs, for `Fleet(...)` and `Fleet.open(...)` alike (the constructor's defaults apply)."""

    todos_path: Path | None
    history_path: Path | None
    demo: bool
    telemetry: bool
    probe_interval: float
    auto_complete_todos: bool | None
    watch: bool


class Fleet:
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
        clock: Callable[[], float] = time.time,
        events: PubSub[FleetEvent] | None = None,  # a stream subscribed to before (fleet/starting.py)
    ) -> None:
        self.demo = demo
        self.history_path = Path(history_path or DEFAULT_HISTORY)
        self.todos_path = Path(todos_path or DEFAULT_TODOS)
        self.events: PubSub[FleetEvent] = events if events is not None else PubSub(QUEUE_SIZE)
        publish = self.events.publish
        self.hosts = Hosts(
            profiles, publish, self._guard, watch=watch, telemetry=telemetry, probe_interval=probe_interval,
            clock=clock,
        )  # fmt: skip
        self.services = ServiceDesk(self.hosts, publish)
        self.bench = BenchDesk(self)  # benchmarks: targets, runs, history (fleet/benching.py)
        self.todo_desk = Todos(
            self.todos_path, self.history_path, publish, self.snapshot, auto_complete_todos
        )
        self._started = False
        self._bg: list[asyncio.Task[None]] = []

    # --- the door ------------------------------------------------------------------------------------------
    async def do(self, intent: AnyIntent) -> Outcome:
        """Carry out one intent (the one dispatch of model/intents.py) and say how it went. Raises ValueError
        for an unknown host or service; every other failure is an Outcome that is not ok."""
        match intent:
            case Launch(ref=ref, force=force):
                return Outcome.of_action(await self.services.launch(ref, force=force))
            case Kill(ref=ref, timeout=timeout):
                return Outcome.of_action(await self.services.kill(ref, timeout=timeout))
            case Restart(ref=ref, force=force):
                return Outcome.of_action(await self.services.restart(ref, force=force))
            case Move(ref=ref, to_host=to_host, startup_timeout=t):
                return Outcome.of_action(await self.services.move(ref, to_host, startup_timeout=t))
            case Bench(request=req):
                run = await self.bench.run_bench(req)
                return Outcome(ok=True, message=f"bench {run.id}: {len(run.results)} results", run_id=run.id)
            case Todo(edit=edit):
                return Outcome.of_todo(await self.todo_desk.todo_apply(edit))

    def snapshot(self) -> FleetSnapshot:
        return snap.build_snapshot(self.hosts, self.todo_desk.view)

    def subscribe(
        self, kinds: tuple[type, ...] = (), skip: tuple[type, ...] = ()
    ) -> asyncio.Queue[FleetEvent]:
        """A queue of every event from now on (or of `kinds` only, less `skip`); a slow reader loses the
        oldest (the core never waits)."""
        return self.events.subscribe(kinds, skip)

    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None:
        self.events.unsubscribe(q)

    def wants(self, kind: type) -> bool:
        """Whether any subscriber takes an event of type `kind` now (an event nobody reads need not be made)."""
        return self.events.wants(kind)

    def publish(self, ev: FleetEvent) -> None:
        self.events.publish(ev)

    # --- lifetime ------------------------------------------------------------------------------------------
    def profiles(self) -> list[HostProfile]:
        return list(self.hosts.profiles)

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        await self.hosts.start_all()
        self._bg.append(asyncio.create_task(self.todo_desk.run_loop(), name="todo-loop"))
        self._bg.append(asyncio.create_task(self._guard(lambda: run_alerts(self), "alerts"), name="alerts"))

    async def _guard(self, run: Callable[[], Awaitable[None]], what: str) -> None:
        """A background task whose crash is reported, never silent and never fatal to the app."""
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # pragma: no cover - reported to the user
            log.exception("%s failed", what)
            self.publish(Notice(severity="error", text=f"{what} stopped: {e}"))

    async def stop(self) -> None:
        if self.demo:  # what this session launched, all at once: each kill waits on its own process
            await asyncio.gather(
                *(self.services.kill(ref) for ref in list(self.services.launched)), return_exceptions=True
            )
        await cancel_and_wait(self._bg)
        await self.hosts.stop_all()
        self._started = False

    async def reload_profiles(self, profiles: Sequence[HostProfile] | None = None) -> list[str]:
        return await self.hosts.reload(profiles)

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

    async def wait_settled(self, timeout: float) -> None:
        await self.hosts.wait_settled(timeout)

    # --- reads ---------------------------------------------------------------------------------------------
    def gpu_history(self, host: str, gpu_index: int, metric: str = "util_gpu") -> list[float]:
        return snap.gpu_history(self.hosts, host, gpu_index, metric)

    def log_lines(self, ref: str) -> list[str]:
        return snap.log_lines(self.hosts, ref)

    def transport(self, host: str) -> Transport:
        return self.hosts.host(host).transport

    def spec_of(self, ref: Ref) -> tuple[HostProfile, ServiceSpec]:
        return self.hosts.spec_of(ref)

    # --- thin delegations to the desks (the sweep, the headless modes and tests call these; the desks say
    # what each does) ------------------------------------------------------------------------------------
    async def launch(self, ref: Ref, *, force: bool = False) -> ActionResult:
        return await self.services.launch(ref, force=force)

    async def kill(self, ref: Ref, *, timeout: float | None = None) -> ActionResult:
        return await self.services.kill(ref, timeout=timeout)

    async def restart(self, ref: Ref, *, force: bool = False) -> ActionResult:
        return await self.services.restart(ref, force=force)

    async def move(self, ref: Ref, to_host: str, *, startup_timeout: float | None = None) -> ActionResult:
        return await self.services.move(ref, to_host, startup_timeout=startup_timeout)

    def hold(self, ref: Ref, owner: str) -> None:
        self.services.hold(ref, owner)

    def release(self, ref: Ref, owner: str) -> None:
        self.services.release(ref, owner)

    def held_by(self, ref: Ref) -> str | None:
        return self.services.held_by(ref)

    def held_elsewhere(self, ref: Ref) -> str | None:
        return self.services.held_elsewhere(ref)

    async def reach(self, host: str) -> str | None:
        return await self.services.reach(host)

    def current_spec(self, ref: Ref) -> ServiceSpec:
        return self.services.current_spec(ref)

    async def preflight(self, ref: Ref, spec: ServiceSpec) -> ArgCheck | None:
        return await self.services.preflight(ref, spec)

    async def deploy(self, ref: Ref, spec: ServiceSpec, *, holder: str | None = None) -> ActionResult:
        return await self.services.deploy(ref, spec, holder=holder)

    async def wait_service(self, ref: Ref, states: set[str], timeout: float) -> ServiceStatus:
        return await self.services.wait_service(ref, states, timeout)

    async def logs(self, ref: Ref, lines: int = 30) -> list[str]:
        return await self.services.logs(ref, lines)

    def follow_log(self, ref: Ref, on_gap: Callable[[str], None] | None = None) -> AsyncIterator[str]:
        return self.services.follow_log(ref, on_gap)

    async def patches(self, action: PatchAction, host: str, sets: Sequence[PatchSet]) -> list[PatchReport]:
        return await self.services.patches(action, host, sets)

    async def doctor(self, host: str) -> DoctorReport:
        return await self.services.doctor(host)

    async def smoke(
        self,
        ref: Ref,
        prompt: str = SMOKE_PROMPT,
        max_new_tokens: int = 32,
        timeout: float = 30.0,
        api: str = "generate",
        model: str | None = None,
        force: bool = False,
    ) -> SmokeResult:
        return await self.services.smoke(ref, prompt, max_new_tokens, timeout, api, model, force)

    async def identify(self, ref: Ref) -> TargetIdentity:
        """Who answers on the service's port: ours, stopped, foreign (fleet/identity.py)."""
        return await self.services.identify(ref)

    async def service_url(self, ref: Ref) -> str:
        """http://127.0.0.1:PORT reaching the service (its port forwarded over the host's transport)."""
        h, svc = self.hosts.split(ref)
        return await h.services.base_url(svc)

    async def run_bench(self, req: BenchRequest, stop: asyncio.Event | None = None) -> BenchRun:
        return await self.bench.run_bench(req, stop)

    async def flush_cache(self, refs: Sequence[Ref], before: str = "point") -> list[CacheFlush]:
        """Issue 26: reset each service's prefix cache (the sweep, before each point); recorded, never raised."""
        return await self.bench.flush_cache([str(r) for r in refs], before)

    async def run_load_shape(self, req: ShapeRequest, stop: asyncio.Event | None = None) -> ShapeRun:
        return await self.bench.run_shape(req, stop)

    async def bench_targets(self, refs: Sequence[str]) -> list[BenchTarget]:
        return await self.bench.bench_targets(refs)

    def bench_history(self) -> list[AnyRun]:
        return self.bench.history()

    def todo_evidence(self) -> list[ItemEvidence]:
        return self.todo_desk.todo_evidence()

    async def refresh_todos(self) -> bool:
        return await self.todo_desk.refresh_todos()

    async def todo_apply(self, edit: TodoEdit) -> TodoResult:
        return await self.todo_desk.todo_apply(edit)

    @property
    def todos(self) -> TodoStore:
        """The todo store (read it; change it through `do(Todo(...))`)."""
        return self.todo_desk.todos

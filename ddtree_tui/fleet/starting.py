"""`StartingFleet`: the fleet as the TUI holds it before its first frame (issue 28, first paint under 1 s).

Importing the core (`fleet/core.py` and the engines under it: services, telemetry, the bench engines, aiohttp)
and starting its hosts took most of the time before the first frame. The TUI now paints first, on this
stand-in, which imports none of that: the profiles' hosts are shown `connecting` (nothing connected, sampled or
measured yet), the todo list and the bench history as their files say. `build()` then imports the core in a
thread (the event loop keeps painting and taking keys) and makes the real `Fleet` on the same event stream;
the face swaps it in and starts it. A call that needs the core before then waits for it; nothing is lost."""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ddtree_tui.bench import history
from ddtree_tui.config import HostProfile
from ddtree_tui.lib.pubsub import PubSub
from ddtree_tui.model.events import FleetEvent
from ddtree_tui.model.snapshot import FleetSnapshot, HostView
from ddtree_tui.todo import DEFAULT_TODOS, TodoStore
from ddtree_tui.todo.evidence import todo_view

if TYPE_CHECKING:
    from ddtree_tui.bench.models import BenchRequest, BenchRun, ShapeRequest
    from ddtree_tui.bench.results import AnyRun, ShapeRun
    from ddtree_tui.bench.smoke import SmokeResult
    from ddtree_tui.doctor import DoctorReport
    from ddtree_tui.fleet.core import Fleet, FleetOptions
    from ddtree_tui.model.intents import AnyIntent, Outcome
    from ddtree_tui.model.todo import ItemEvidence

QUEUE_SIZE = 2000  # the core's (fleet/core.py): the stream is the same one once the Fleet is built

# what the Fleet's start imports besides the core (the ssh transport only when a profile needs it): in the
# build thread too, so that the start does not import on the event loop
_CORE = "ddtree_tui.fleet.core"
_SSH = "ddtree_tui.transport.ssh"
# a host's start (fleet/hosts.py start_host) imports its service manager and sampler where a host starts
_HOST = ("ddtree_tui.services.lifecycle", "ddtree_tui.telemetry.sampler")


class FleetStopped(RuntimeError):
    """The fleet was stopped (the app quit) before its core was built: there is nothing to start."""


def connecting_view(profile: HostProfile) -> HostView:
    """A host not started yet: `connecting`, with nothing sampled or watched (its services appear when its
    service manager reports them)."""
    return HostView(name=profile.name, address=profile.address, state="connecting")


def _import_core(ssh: bool, hosts: bool = True) -> None:
    importlib.import_module(_CORE)
    if hosts:
        for name in _HOST:
            importlib.import_module(name)
    if ssh:
        importlib.import_module(_SSH)


class StartingFleet:
    """The app's fleet until the core is built: answers the reads from the profiles and files, waits for the
    core for everything else. `build()` once, then use the Fleet it returns (the controller swaps it in)."""

    def __init__(self, profiles: Sequence[HostProfile], **options: Unpack[FleetOptions]) -> None:
        self._profiles = list(profiles)
        self._options = options
        self.demo = bool(options.get("demo", False))
        self.history_path = Path(options.get("history_path") or history.DEFAULT_HISTORY)
        todos = TodoStore(Path(options.get("todos_path") or DEFAULT_TODOS))
        todos.load()
        self._todos = todo_view(todos)
        self.events: PubSub[FleetEvent] = PubSub(QUEUE_SIZE)
        self._build: asyncio.Task[Fleet | None] | None = None
        self._stopped = False

    # --- the core --------------------------------------------------------------------------------------------
    async def build(self) -> Fleet | None:
        """The real Fleet on this stand-in's event stream (subscribers keep their queues), its core imported in
        a thread; made once. None when `stop()` came first (the app quit): nothing is to start."""
        if self._build is None:
            self._build = asyncio.create_task(self._make(), name="fleet-build")
        return await asyncio.shield(self._build)

    async def _make(self) -> Fleet | None:
        if not self._stopped:
            await asyncio.to_thread(
                _import_core, any(not p.is_local for p in self._profiles), bool(self._profiles)
            )
        if self._stopped:
            return None
        from ddtree_tui.fleet.core import Fleet  # imported by the thread above: a dictionary lookup

        return Fleet(self._profiles, events=self.events, **self._options)

    async def _core(self) -> Fleet:
        fleet = await self.build()
        if fleet is None:
            raise FleetStopped("the fleet was stopped before its core was built")
        return fleet

    async def start(self) -> None:
        await (await self._core()).start()

    async def stop(self) -> None:
        """Nothing more is built; a Fleet already built is stopped (it may have been started by its holder)."""
        self._stopped = True
        task = self._build
        if task is not None and task.done() and not task.cancelled() and task.exception() is None:
            fleet = task.result()
            if fleet is not None:
                await fleet.stop()

    # --- reads before the core is up -----------------------------------------------------------------------
    def snapshot(self) -> FleetSnapshot:
        return FleetSnapshot(
            ts=time.time(), hosts=[connecting_view(p) for p in self._profiles], todos=self._todos
        )

    def subscribe(self) -> asyncio.Queue[FleetEvent]:
        return self.events.subscribe()

    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None:
        self.events.unsubscribe(q)

    def publish(self, ev: FleetEvent) -> None:
        self.events.publish(ev)

    def profiles(self) -> list[HostProfile]:
        return list(self._profiles)

    def gpu_history(self, host: str, gpu_index: int, metric: str = "util_gpu") -> list[float]:
        return []  # nothing sampled yet

    def log_lines(self, ref: str) -> list[str]:
        return []  # nothing followed yet

    def bench_history(self) -> list[AnyRun]:
        return history.recent_runs(self.history_path)

    def todo_evidence(self) -> list[ItemEvidence]:
        return []  # not evaluated yet

    # --- everything else waits for the core ----------------------------------------------------------------
    async def do(self, intent: AnyIntent) -> Outcome:
        return await (await self._core()).do(intent)

    async def smoke(
        self, ref: str, prompt: str = "Say hello in one short sentence.", max_new_tokens: int = 32
    ) -> SmokeResult:
        return await (await self._core()).smoke(ref, prompt, max_new_tokens)

    async def run_bench(self, req: BenchRequest, stop: asyncio.Event | None = None) -> BenchRun:
        return await (await self._core()).run_bench(req, stop)

    async def run_load_shape(self, req: ShapeRequest, stop: asyncio.Event | None = None) -> ShapeRun:
        return await (await self._core()).run_load_shape(req, stop)

    async def doctor(self, host: str) -> DoctorReport:
        return await (await self._core()).doctor(host)

    async def reload_profiles(self) -> list[str]:
        return await (await self._core()).reload_profiles()

"""What the UI needs from the core (the Fleet), as a Protocol, plus StaticFleet: a frozen stand-in that
renders one fixed snapshot. StaticFleet is how snapshot tests and screenshots get stable pixels (no clocks,
no live data), and how the app is developed without hosts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from ddtree_tui.bench.models import BenchRequest, BenchRun, ShapeRequest
from ddtree_tui.bench.results import AnyRun, ShapeRun
from ddtree_tui.config import HostProfile
from ddtree_tui.lib.pubsub import PubSub
from ddtree_tui.model.events import FleetEvent
from ddtree_tui.model.intents import AnyIntent, Outcome, describe
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.model.todo import ItemEvidence, TodoItem, TodoView
from ddtree_tui.ui.views import HistoryRun

if TYPE_CHECKING:  # the doctor package (and the telemetry it imports), the smoke client: loaded when used
    from ddtree_tui.bench.smoke import SmokeResult  # (issue 28: not before the first frame)
    from ddtree_tui.doctor import DoctorReport

# Fleet.run_bench and its stand-ins (StaticFleet, collector AttachedFleet): a BenchRequest in, a BenchRun or a
# refusal in words out
BenchCall = Callable[[BenchRequest], Awaitable[BenchRun | Outcome]]


@runtime_checkable
class FleetLike(Protocol):
    """The subset of ddtree_tui.fleet.Fleet the app calls; Fleet satisfies it structurally, and so do the
    frozen fleet here and the collector's attached and replayed ones. Every change goes through `do` (the
    typed intents of model/intents.py); the todo list is read from the snapshot (`snapshot().todos`)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def snapshot(self) -> FleetSnapshot: ...
    def subscribe(self) -> asyncio.Queue[FleetEvent]: ...
    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None: ...
    def gpu_history(self, host: str, gpu_index: int, metric: str = "util_gpu") -> list[float]: ...
    def log_lines(self, ref: str) -> list[str]: ...
    async def do(self, intent: AnyIntent) -> Outcome: ...
    async def smoke(
        self, ref: str, prompt: str = "Say hello in one short sentence.", max_new_tokens: int = 32
    ) -> SmokeResult: ...
    @property
    def run_bench(self) -> BenchCall:
        """A plain run: the BenchRequest the bench dialog built."""
        ...

    def bench_history(self) -> list[AnyRun]: ...
    async def doctor(self, host: str) -> DoctorReport: ...
    async def reload_profiles(self) -> list[str]: ...
    def todo_evidence(self) -> list[ItemEvidence]: ...
    def profiles(self) -> list[HostProfile]: ...


@runtime_checkable
class Deferred(Protocol):
    """A fleet whose core is built after the first frame (fleet/starting.py StartingFleet, what the TUI paints
    first): `build()` gives the real fleet, on the same event stream, to use from then on; None when it was
    stopped first."""

    async def build(self) -> FleetLike | None: ...


@runtime_checkable
class LoadShaper(Protocol):
    """A fleet that runs load ladders, soaks and agentic sessions (Fleet.run_load_shape, given the
    ShapeRequest the dialog or a key built), and plain runs that a `stop` event ends early with what was
    measured saved (the TUI's Stop, exactly as Ctrl-C headless). A frozen or attached fleet has none: the
    app says so."""

    async def run_load_shape(self, req: ShapeRequest, stop: asyncio.Event | None = None) -> ShapeRun: ...
    async def run_bench(self, req: BenchRequest, stop: asyncio.Event | None = None) -> BenchRun: ...


@runtime_checkable
class ReadOnlyFleet(Protocol):
    """A fleet that may take no intents (a replay, a collector attached without a token): `read_only_reason`
    says why in words, or None when intents go through. The app then offers none and refuses each at once."""

    def read_only_reason(self) -> str | None: ...


@runtime_checkable
class FrozenFleet(Protocol):
    """A fleet that shows one instant: the app starts nothing on it and its clock stops at that instant."""

    def frozen_at(self) -> float: ...


class StaticTodo(BaseModel):
    content: str
    status: str = "pending"
    priority: str = "medium"
    check: str | None = None
    id: str | None = None


class StaticTodos:
    """An in-memory todo list with the TodoStore verbs, for frozen rendering."""

    def __init__(self, items: list[StaticTodo] | None = None) -> None:
        self.items: list[StaticTodo] = list(items or [])
        self.error: str | None = None
        self.read_only = False
        self.path: Path | None = None


class StaticFleet(PubSub[FleetEvent]):
    """A fleet frozen at one snapshot: intents answer 'frozen' and nothing is started."""

    def __init__(
        self,
        snapshot: FleetSnapshot,
        profiles: list[HostProfile] | None = None,
        history: dict[tuple[str, int], list[float]] | None = None,
        logs: dict[str, list[str]] | None = None,
        todos: list[StaticTodo] | None = None,
        evidence: list[ItemEvidence] | None = None,
        bench_runs: list[HistoryRun] | None = None,
        doctor_reports: dict[str, DoctorReport] | None = None,
    ) -> None:
        self._snap = snapshot.model_copy(update={"todos": _todo_view(todos or [], evidence or [])})
        self._profiles = profiles or []
        self._history = history or {}
        self._logs = logs or {}
        self.todos = StaticTodos(todos)
        self._evidence = evidence or []
        self._bench = bench_runs or []
        self._doctor = doctor_reports or {}
        PubSub.__init__(self)  # nothing is ever published: the snapshot is frozen

    async def start(self) -> None:
        """Nothing to start: the view is frozen."""

    async def stop(self) -> None:
        """Nothing to stop."""

    def snapshot(self) -> FleetSnapshot:
        return self._snap

    def frozen_at(self) -> float:
        return self._snap.ts

    def gpu_history(self, host: str, gpu_index: int, metric: str = "util_gpu") -> list[float]:
        return list(self._history.get((host, gpu_index), []))

    def log_lines(self, ref: str) -> list[str]:
        return list(self._logs.get(ref, []))

    async def _frozen(self, what: str) -> Outcome:
        return Outcome.refused(f"{what}: the view is frozen (snapshot mode)")

    async def do(self, intent: AnyIntent) -> Outcome:
        """Refused, whatever the intent."""
        return await self._frozen(describe(intent))

    async def smoke(self, ref: str, *_: object, **__: object) -> SmokeResult:
        """A failed SmokeResult whatever the settings: a frozen view sends no request."""
        from ddtree_tui.bench.smoke import failed

        return failed(ref, "the view is frozen (snapshot mode): no request sent")

    async def run_bench(self, req: BenchRequest) -> Outcome:
        """Refused whatever the request."""
        return await self._frozen("bench")

    def bench_history(self) -> list[HistoryRun]:
        return list(self._bench)

    async def reload_profiles(self) -> list[str]:
        raise RuntimeError("the view is frozen (snapshot mode): profiles are not reloaded")

    async def doctor(self, host: str) -> DoctorReport:
        """The report given for the host, else one finding saying nothing was checked."""
        from ddtree_tui.doctor import DoctorReport, Finding

        if host in self._doctor:
            return self._doctor[host]
        addr = next((p.address for p in self._profiles if p.name == host), "")
        return DoctorReport(
            host=host,
            address=addr,
            findings=[
                Finding(
                    check="doctor",
                    status="warn",
                    evidence="the view is frozen (snapshot mode): no checks ran",
                    fix=f"run `ddtree-tui doctor {host}`",
                )
            ],
        )

    def todo_evidence(self) -> list[ItemEvidence]:
        return list(self._evidence)

    def profiles(self) -> list[HostProfile]:
        return list(self._profiles)


def _todo_view(todos: list[StaticTodo], evidence: list[ItemEvidence]) -> TodoView:
    """The frozen list as the snapshot carries it."""
    return TodoView(
        items=[TodoItem.model_validate(t.model_dump(exclude_none=True)) for t in todos],
        evidence=list(evidence),
    )

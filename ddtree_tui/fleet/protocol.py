"""What the fleet's clients may rely on, as Protocols: the door every face uses (`Door`: `do` an intent,
publish a notice) and what a sweep drives (`SweepFleet`). The live Fleet satisfies both structurally; the
frozen, attached and replayed fleets answer `Door` too. Clients name these, never `Any`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ddtree_tui.model.events import FleetEvent
from ddtree_tui.model.intents import AnyIntent, Outcome
from ddtree_tui.model.ref import RefLike
from ddtree_tui.model.snapshot import ActionResult, FleetSnapshot, ServiceStatus

if TYPE_CHECKING:
    from ddtree_tui.bench.models import BenchTarget
    from ddtree_tui.bench.smoke import SmokeResult
    from ddtree_tui.config import HostProfile, ServiceSpec
    from ddtree_tui.services.argcheck import ArgCheck

Ref = RefLike


@runtime_checkable
class Door(Protocol):
    """The one way a face changes anything: a typed intent in, an Outcome out."""

    async def do(self, intent: AnyIntent) -> Outcome: ...
    def publish(self, ev: FleetEvent) -> None: ...


@runtime_checkable
class SweepFleet(Protocol):
    """What a sweep (sweep/runner.py) asks of the fleet: specs, one-off deploys under its hold, waits, a
    smoke and bench targets, and the snapshot."""

    def snapshot(self) -> FleetSnapshot: ...
    def spec_of(self, ref: Ref) -> tuple[HostProfile, ServiceSpec]: ...
    def current_spec(self, ref: Ref) -> ServiceSpec: ...
    async def deploy(self, ref: Ref, spec: ServiceSpec, *, holder: str | None = None) -> ActionResult: ...
    async def wait_service(self, ref: Ref, states: set[str], timeout: float) -> ServiceStatus: ...
    async def logs(self, ref: Ref, lines: int = 30) -> list[str]: ...
    async def smoke(
        self,
        ref: Ref,
        prompt: str = ...,
        max_new_tokens: int = ...,
        timeout: float = ...,
        api: str = ...,
        model: str | None = ...,
    ) -> SmokeResult: ...
    async def bench_targets(self, refs: Sequence[str]) -> list[BenchTarget]: ...
    async def preflight(self, ref: Ref, spec: ServiceSpec) -> ArgCheck | None: ...
    def hold(self, ref: Ref, owner: str) -> None: ...
    def release(self, ref: Ref, owner: str) -> None: ...

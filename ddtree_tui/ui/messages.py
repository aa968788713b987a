"""Intents that panes and screens post upward. A widget never acts on the fleet itself: it says what the user
wants and the App carries it out in a worker, so no I/O ever runs on the UI path."""

from __future__ import annotations

from typing import Literal

from textual.message import Message

from ddtree_tui.bench.models import BenchRequest, ShapeRequest
from ddtree_tui.model.intents import ServiceIntent as ServiceIntentModel

ServiceVerb = Literal["launch", "kill", "restart", "move", "logs", "bench", "smoke"]


class ServiceSelected(Message):
    """The cursor moved onto a service (HOST/SVC); the log pane and actions follow it."""

    def __init__(self, ref: str) -> None:
        super().__init__()
        self.ref = ref


class HostSelected(Message):
    """The cursor moved onto a host; the GPU pane narrows to it (None = all hosts)."""

    def __init__(self, host: str | None) -> None:
        super().__init__()
        self.host = host


class ServiceRequest(Message):
    """The user pressed something for a service (a key, a button, the palette): what to ask, confirm or
    show (ui/service_actions.py); a confirmed change becomes a ServiceIntent."""

    def __init__(self, verb: ServiceVerb, ref: str, to_host: str | None = None) -> None:
        super().__init__()
        self.verb = verb
        self.ref = ref
        self.to_host = to_host


class ServiceIntent(Message):
    """A confirmed change to a service, in the fleet's own vocabulary (model/intents.py): the app hands it to
    the controller, which carries it to `fleet.do` in a worker."""

    def __init__(self, intent: ServiceIntentModel) -> None:
        super().__init__()
        self.intent = intent


class TodoIntent(Message):
    """A change to the todo list: add, edit, start, complete, toggle, delete, up, down."""

    def __init__(
        self,
        verb: Literal["add", "edit", "start", "complete", "toggle", "delete", "up", "down"],
        index: int | None = None,
    ) -> None:
        super().__init__()
        self.verb = verb
        self.index = index


class BenchIntent(Message):
    """Run a benchmark: the services and choices of the bench dialog."""

    def __init__(self, params: BenchRequest) -> None:
        super().__init__()
        self.params = params


class ShapeIntent(Message):
    """Run a load shape, soak or agentic sessions on `refs` (None: the ready services), from a key or the
    bench dialog; the app runs it through the fleet and the bench pane follows its events."""

    def __init__(self, params: ShapeRequest, refs: list[str] | None = None) -> None:
        super().__init__()
        self.params = params
        self.refs = refs


class DrillDown(Message):
    """Enter on a row: show everything about this host, GPU (HOST:INDEX) or service (HOST/SVC)."""

    def __init__(self, kind: Literal["host", "gpu", "service"], key: str) -> None:
        super().__init__()
        self.kind = kind
        self.key = key

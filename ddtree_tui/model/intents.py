"""The one vocabulary of intents: what a face (the TUI, the collector's HTTP API, the CLI) asks the fleet to
do, as one pydantic union discriminated by `kind`, and the one `Outcome` every intent answers.

A new intent is written here, in `Fleet.do` (the one dispatch) and where a face offers it; nowhere else. The
collector's JSON bodies are these models (less `kind`, which is the URL's verb), so HTTP and the TUI cannot
drift apart.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# the request a face builds for a plain run (bench/models.py): the one import of model/ from above it
# (import-linter's layers contract names it in ignore_imports)
from ddtree_tui.bench.models import BenchRequest
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.model.snapshot import ActionResult
from ddtree_tui.model.todo import TodoEdit, TodoResult


class _Intent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Launch(_Intent):
    """Start a service as its profile (or a move) has it; `force` launches even when the host's SGLang parser
    rejects the command line."""

    kind: Literal["launch"] = "launch"
    ref: ServiceRef
    force: bool = False


class Kill(_Intent):
    """Stop a service; `timeout`: seconds before SIGKILL (default: the service's kill_timeout)."""

    kind: Literal["kill"] = "kill"
    ref: ServiceRef
    timeout: float | None = Field(default=None, gt=0)


class Restart(_Intent):
    """Kill, then launch again with the same spec."""

    kind: Literal["restart"] = "restart"
    ref: ServiceRef
    force: bool = False


class Move(_Intent):
    """Launch the service on `to_host`, wait until ready (`startup_timeout`, default the spec's), then kill the
    old one."""

    kind: Literal["move"] = "move"
    ref: ServiceRef
    to_host: str = Field(min_length=1)
    startup_timeout: float | None = Field(default=None, gt=0)


class Bench(_Intent):
    """A plain benchmark run: the request the face built (bench/models.py BenchRequest, its defaults)."""

    kind: Literal["bench"] = "bench"
    request: BenchRequest


class Todo(_Intent):
    """One change to the todo list (the fleet is the file's one writer while it runs)."""

    kind: Literal["todo"] = "todo"
    edit: TodoEdit


ServiceIntent = Launch | Kill | Restart | Move
AnyIntent = Launch | Kill | Restart | Move | Bench | Todo
Intent = Annotated[AnyIntent, Field(discriminator="kind")]
# built the first time an intent is parsed (a face's body), not at import: a headless run imports this
# module for the intent types alone, and the union's validator was 15 ms of every start (issue 26)
INTENTS: TypeAdapter[AnyIntent] = TypeAdapter(Intent, config=ConfigDict(defer_build=True))
KINDS: tuple[str, ...] = ("launch", "kill", "restart", "move", "bench", "todo")


def parse_intent(kind: str, body: object) -> AnyIntent:
    """A face's body for the intent `kind` (the collector's URL verb) as the typed intent: KeyError for an
    unknown kind, pydantic's ValidationError for a bad body. A service intent's body is its fields (`ref`,
    `to_host`, ...); a bench's is BenchRequest's; a todo's is TodoEdit's."""
    if kind not in KINDS:
        raise KeyError(kind)
    if kind == "bench":
        return INTENTS.validate_python({"kind": kind, "request": body})
    if kind == "todo":
        return INTENTS.validate_python({"kind": kind, "edit": body})
    return INTENTS.validate_python({**body, "kind": kind} if isinstance(body, dict) else body)


def intent_body(intent: AnyIntent) -> dict[str, object]:
    """The body `parse_intent` reads back for `intent.kind` (what an attached TUI POSTs to a collector)."""
    match intent:
        case Bench():
            return intent.request.model_dump(mode="json")
        case Todo():
            return intent.edit.model_dump(mode="json", exclude_none=True)
        case _:
            return intent.model_dump(mode="json", exclude={"kind"}, exclude_defaults=True)


def describe(intent: AnyIntent) -> str:
    """The intent in a few words, as a notice or a busy marker says it (`kill local/dflash`)."""
    match intent:
        case Move():
            return f"move {intent.ref} -> {intent.to_host}"
        case Launch() | Kill() | Restart():
            return f"{intent.kind} {intent.ref}"
        case Bench():
            return f"bench {intent.request.prompt_set} on {', '.join(intent.request.refs)}"
        case Todo():
            return f"todo {intent.edit.action}"


class Outcome(BaseModel):
    """What any intent answered: did it work and why, in words a person can act on, plus its typed detail
    (`action` for a service intent, `todo` for a todo edit, `run_id` for a bench run)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    message: str
    suggestion: str | None = None
    invalid: bool = False  # the request could never succeed (a bad index or value), not a refusal
    action: ActionResult | None = None
    todo: TodoResult | None = None
    run_id: str | None = None

    @classmethod
    def of_action(cls, res: ActionResult) -> Outcome:
        return cls(ok=res.ok, message=res.message, suggestion=res.suggestion, action=res)

    @classmethod
    def of_todo(cls, res: TodoResult) -> Outcome:
        return cls(ok=res.ok, message=res.message, suggestion=res.suggestion, invalid=res.invalid, todo=res)

    @classmethod
    def refused(cls, message: str, suggestion: str | None = None) -> Outcome:
        return cls(ok=False, message=message, suggestion=suggestion)

"""Typed replies of the service host programs (`ddtree_tui/remote/`: launch, kill, watch, read_log).

The host programs speak JSON (stdlib only); this is where their answers become models, once, at the
boundary (`parse_reply`), so a reply of the wrong shape is one clear `BadReply` naming the program instead of
a KeyError deep in the status code. The models are lax where the data comes from a file on the host (a
pidfile, an exit file): a value of the wrong type there reads as unknown rather than failing the whole
reply. The argcheck reply becomes `services.argcheck.ArgCheck` (the verdict) from `ArgcheckReply`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from ddtree_tui.lib.jsontypes import JsonObject
from ddtree_tui.transport.base import TransportError

__all__ = [
    "ArgcheckReply",
    "BadReply",
    "ExitInfo",
    "KillReply",
    "LaunchReply",
    "ReadLogReply",
    "WatchLine",
    "WatchRecord",
    "last_json_object",
    "parse_reply",
]


class BadReply(TransportError):
    """A host program answered, but not with the reply it promises (a TransportError: callers treat it as one)."""


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _ints(v: Any) -> list[int]:
    return [x for x in v if _int(x) is not None] if isinstance(v, list) else []


def _strs(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


LaxInt = Annotated[int | None, BeforeValidator(_int)]
LaxFloat = Annotated[float | None, BeforeValidator(_num)]
LaxInts = Annotated[list[int], BeforeValidator(_ints)]
LaxStrs = Annotated[list[str], BeforeValidator(_strs)]
LaxStr = Annotated[str | None, BeforeValidator(_str)]


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ExitInfo(_Reply):
    """`run/<svc>.exit`, written by the wrapper when the service ends (or could not start)."""

    exit_code: LaxInt = None
    signal: LaxInt = None
    error: LaxStr = None
    ended_at: LaxFloat = None


def _exit(v: Any) -> Any:
    return v if isinstance(v, dict) else None


LaxExit = Annotated[ExitInfo | None, BeforeValidator(_exit)]


class WatchRecord(_Reply):
    """One service's process state as the watcher saw it (remote/watch.py `one`)."""

    present: bool = False  # a pidfile exists (in a trusted workdir)
    untrusted: LaxStr = None  # why the workdir cannot be believed
    error: LaxStr = None  # the watcher failed on this service
    pid: LaxInt = None
    pgid: LaxInt = None
    started_at: LaxFloat = None
    argv_hash: LaxStr = None
    port: LaxInt = None
    alive: bool = False  # the pid still runs our argv, with our start time and uid
    pids: LaxInts = Field(default_factory=list)  # the live group members
    last: LaxStrs = Field(default_factory=list)  # the log's last line, while alive
    why: LaxStr = None  # not alive: dead / pid-reused / foreign
    other_cmd: LaxStr = None  # the command line the pid runs now (pid-reused / foreign)
    stopping: bool = False  # our kill is under way
    exit: LaxExit = None
    tail: LaxStrs = Field(default_factory=list)
    orphans: LaxInts = Field(default_factory=list)  # workers a dead main process left behind
    orphan_gpu: list[Any] = Field(default_factory=list)  # [gpu index, MiB] pairs of the orphans


class WatchLine(_Reply):
    """One line of the watcher stream: every service's record at `ts`."""

    PROGRAM: ClassVar[str] = "the status watcher (remote/watch.py)"

    ts: LaxFloat = None
    services: dict[str, WatchRecord]


class PortHolder(_Reply):
    pid: LaxInt = None
    cmd: LaxStr = None


class StaleNote(_Reply):
    pid: LaxInt = None
    why: LaxStr = None


class LaunchedRecord(_Reply):
    """The pidfile the wrapper wrote for a launch that started."""

    pid: LaxInt = None
    pgid: LaxInt = None
    started_at: LaxFloat = None


class LaunchReply(_Reply):
    """remote/launch.py: ok with the pidfile record, or why not (`reason`)."""

    PROGRAM: ClassVar[str] = "remote/launch.py"

    ok: bool
    reason: LaxStr = None  # workdir / busy / running / degraded / port / space / exec / timeout
    why: LaxStr = None
    pid: LaxInt = None
    pids: LaxInts = Field(default_factory=list)
    started_at: LaxFloat = None
    port: LaxInt = None
    holder: PortHolder | None = None  # the port's owner; {} (no fields) when it belongs to another user
    next_free: LaxInt = None
    exit: LaxExit = None
    tail: LaxStrs = Field(default_factory=list)
    record: LaunchedRecord | None = None
    stale: StaleNote | None = None


class KillReply(_Reply):
    """remote/kill.py: what happened to the pidfile's process (and its group)."""

    PROGRAM: ClassVar[str] = "remote/kill.py"

    ok: bool
    result: str  # terminated / killed / not-running / stale / group-ended / untrusted / pid-reused / foreign / survived
    why: LaxStr = None
    pid: LaxInt = None
    cmd: LaxStr = None
    how: LaxStr = None
    ended: LaxInts = Field(default_factory=list)
    survivors: LaxInts = Field(default_factory=list)
    exit: LaxExit = None
    waited: LaxFloat = None


class ArgcheckReply(_Reply):
    """remote/argcheck.py: what the host's SGLang parser said about one argv (services.argcheck reads it)."""

    PROGRAM: ClassVar[str] = "remote/argcheck.py"

    argcheck: Any = None  # the protocol version; present in every real answer
    python: LaxStr = None
    version: LaxStr = None
    parser: bool = False  # False: sglang.srt.server_args did not load (import_error says why)
    import_error: LaxStr = None
    unknown: LaxStrs = Field(default_factory=list)
    error: LaxStr = None
    bad_flag: LaxStr = None
    algorithm_error: LaxStr = None
    algorithms: list[str] | None = None
    algorithms_note: LaxStr = None
    ddtree_flags: LaxStrs = Field(default_factory=list)
    ddtree_env: LaxStrs = Field(default_factory=list)
    flags: LaxStrs = Field(default_factory=list)


class ReadLogReply(_Reply):
    """remote/read_log.py: the last lines of one log file."""

    PROGRAM: ClassVar[str] = "remote/read_log.py"

    lines: LaxStrs = Field(default_factory=list)


R = TypeVar("R", bound=BaseModel)


def last_json_object(text: str, key: str | None = None) -> JsonObject | None:
    """The last line of `text` that parses as a JSON object (the call protocol's reply line); with `key`,
    the last one that has that key (a program whose libraries may print JSON of their own)."""
    for line in reversed(text.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and (key is None or key in data):
            return data
    return None


def parse_reply(model: type[R], data: JsonObject, program: str) -> R:
    """`data` as `model`; BadReply naming the program and the first wrong field otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "reply"
        raise BadReply(f"{program} sent a reply of the wrong shape ({where}: {err['msg']})") from None

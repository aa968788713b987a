"""The todo list's shapes: items (todowrite-compatible, unknown fields kept), evidence checks, and the typed
intents and views that cross the Fleet's door (TodoEdit in, TodoResult and TodoView out).

No I/O and no imports of the rest of the core: the snapshot (state.py) carries a TodoView, so this module sits
below it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ddtree_tui.lib import paths

Priority = Literal["high", "medium", "low"]
Status = Literal["pending", "in_progress", "completed", "cancelled"]
PRIORITIES: tuple[str, ...] = ("high", "medium", "low")
STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed", "cancelled")
DEFAULT_TODOS = paths.TODOS


class TodoError(Exception):
    """A todo operation that cannot be done (read-only store, bad index, bad value)."""


class TodoItem(BaseModel):
    """One checklist item; unknown fields are kept so a round trip through us loses nothing."""

    model_config = ConfigDict(extra="allow")

    content: str
    priority: Priority = "medium"
    status: Status = "pending"
    id: str | None = None
    check: str | None = None

    # identity used by the merge: the id, or the content the item had when it was read
    _key: str | None = PrivateAttr(default=None)

    @property
    def opts_in(self) -> bool:
        """`"auto_complete": true` in the file: the item may be completed by its evidence on its own."""
        return (self.model_extra or {}).get("auto_complete") is True

    def to_file_dict(self) -> dict[str, Any]:
        """The item as written: id/check left out when empty and absent from the input."""
        d = self.model_dump(mode="json")
        for opt in ("id", "check"):
            if d.get(opt) is None and opt not in self.model_fields_set:
                d.pop(opt, None)
        return d


# --- evidence checks ------------------------------------------------------------------------------------

CheckKind = Literal["service", "bench", "host", "gpu"]
SERVICE_STATES = ("ready", "stopped", "starting", "unhealthy", "crashed", "unknown")
HOST_STATES = ("connected", "disconnected", "connecting")
GPU_METRICS = {"memory": "mem_used_mb", "mem": "mem_used_mb", "util": "util_gpu", "temp": "temp_c"}
OPS = ("<=", ">=", "<", ">", "==", "!=")
CHECK_HELP = (
    "expected one of: 'service HOST/SVC ready|stopped|starting|unhealthy|crashed', "
    "'bench HOST/SVC SET ok', 'host HOST connected|disconnected', "
    "'gpu HOST:IDX memory|util|temp <|>|<=|>= N' (memory in MiB)"
)


class Check(BaseModel):
    """A piece of evidence an item points at, parsed from its `check` text."""

    model_config = ConfigDict(frozen=True)

    kind: CheckKind
    host: str
    service: str | None = None
    state: str | None = None  # service / host state wanted
    prompt_set: str | None = None
    gpu_index: int | None = None
    metric: str | None = None  # memory | util | temp
    op: str | None = None
    value: float | None = None
    text: str = ""

    @property
    def service_ref(self) -> str:
        return f"{self.host}/{self.service}"


def _split_ref(ref: str, text: str) -> tuple[str, str]:
    host, sep, svc = ref.partition("/")
    if not sep or not host or not svc:
        raise ValueError(f"bad check {text!r}: {ref!r} is not HOST/SVC; {CHECK_HELP}")
    return host, svc


def parse_check(text: str) -> Check:
    """Parse a check text; ValueError with the accepted forms when it is not one of them."""
    raw = " ".join(text.split())
    # allow "memory<1000" without spaces around the operator
    words = re.sub(r"\s*(<=|>=|==|!=|<|>)\s*", r" \1 ", raw).split()
    if not words:
        raise ValueError(f"empty check; {CHECK_HELP}")
    kind = words[0].lower()
    if kind == "service" and len(words) == 3:
        host, svc = _split_ref(words[1], text)
        state = words[2].lower()
        if state not in SERVICE_STATES:
            raise ValueError(f"bad check {text!r}: unknown service state {words[2]!r}; {CHECK_HELP}")
        return Check(kind="service", host=host, service=svc, state=state, text=raw)
    if kind == "bench" and len(words) == 4:
        host, svc = _split_ref(words[1], text)
        if words[3].lower() != "ok":
            raise ValueError(f"bad check {text!r}: a bench check ends with 'ok'; {CHECK_HELP}")
        return Check(kind="bench", host=host, service=svc, prompt_set=words[2], state="ok", text=raw)
    if kind == "host" and len(words) == 3:
        state = words[2].lower()
        if state not in HOST_STATES:
            raise ValueError(f"bad check {text!r}: unknown host state {words[2]!r}; {CHECK_HELP}")
        return Check(kind="host", host=words[1], state=state, text=raw)
    if kind == "gpu" and len(words) == 5:
        host, sep, idx = words[1].rpartition(":")
        if not sep or not host or not idx.isdigit():
            raise ValueError(f"bad check {text!r}: {words[1]!r} is not HOST:INDEX; {CHECK_HELP}")
        metric = words[2].lower()
        if metric not in GPU_METRICS:
            raise ValueError(f"bad check {text!r}: unknown GPU metric {words[2]!r}; {CHECK_HELP}")
        if words[3] not in OPS:
            raise ValueError(f"bad check {text!r}: unknown comparison {words[3]!r}; {CHECK_HELP}")
        try:
            value = float(words[4])
        except ValueError:
            raise ValueError(f"bad check {text!r}: {words[4]!r} is not a number; {CHECK_HELP}") from None
        metric = "memory" if metric == "mem" else metric
        return Check(
            kind="gpu", host=host, gpu_index=int(idx), metric=metric, op=words[3], value=value, text=raw
        )
    raise ValueError(f"bad check {text!r}: {CHECK_HELP}")


EvidenceState = Literal["verified", "failing", "unknown", "none"]


class ItemEvidence(BaseModel):
    """One item's evidence as judged now (`index` is its 0-based position)."""

    model_config = ConfigDict(frozen=True)

    index: int  # 0-based position in the list
    state: EvidenceState
    detail: str = ""
    mismatch: str | None = None


# --- intents and views (the Fleet's door) ---------------------------------------------------------------

TodoAction = Literal["add", "edit", "start", "complete", "toggle", "cancel", "delete", "up", "down"]


class TodoEdit(BaseModel):
    """One change to the checklist, as the UI, the collector and the CLI ask the Fleet for it.

    `index` is the item's 0-based position (all but add). For edit, a field left None is unchanged and
    check="" removes the evidence link.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: TodoAction
    index: int | None = Field(default=None, ge=0)
    content: str | None = None
    priority: Priority | None = None
    check: str | None = None


class TodoResult(BaseModel):
    """What a TodoEdit did: `index` is where the item is now (for a cursor); `invalid` marks a request that
    could never succeed (bad index or value) as opposed to a refusal (read-only file, frozen view)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    message: str
    index: int | None = None
    invalid: bool = False
    suggestion: str | None = None


class TodoView(BaseModel):
    """The checklist as the snapshot carries it: items, their evidence, and why the file is read-only."""

    model_config = ConfigDict(frozen=True)

    items: list[TodoItem] = Field(default_factory=list)
    evidence: list[ItemEvidence] = Field(default_factory=list)
    error: str | None = None
    read_only: bool = False
    path: str | None = None

    def evidence_of(self, index: int) -> ItemEvidence | None:
        return next((e for e in self.evidence if e.index == index), None)

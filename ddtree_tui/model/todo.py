"""The todo list's shapes that cross layers: items (todowrite-compatible, unknown fields kept), their evidence as
judged, the TodoEdit intent, its TodoResult and the TodoView the snapshot carries.

At the bottom (model/) because the snapshot carries a TodoView and the intent union carries a TodoEdit; the
check grammar, the store and the evidence rules stay in ddtree_tui.todo.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ddtree_tui.lib.jsontypes import JsonObject

Priority = Literal["high", "medium", "low"]
Status = Literal["pending", "in_progress", "completed", "cancelled"]
PRIORITIES: tuple[str, ...] = ("high", "medium", "low")
STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed", "cancelled")


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

    def to_file_dict(self) -> JsonObject:
        """The item as written: id/check left out when empty and absent from the input."""
        d = self.model_dump(mode="json")
        for opt in ("id", "check"):
            if d.get(opt) is None and opt not in self.model_fields_set:
                d.pop(opt, None)
        return d


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

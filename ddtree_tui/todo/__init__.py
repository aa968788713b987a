"""A todowrite-compatible checklist that cannot lie: items may carry evidence the core observes.

`model` (the check grammar), `store` (the file: atomic, locked, merging saves) and `evidence` (checks judged
against the snapshot and bench runs); the item, TodoEdit/TodoResult/TodoView shapes live at the bottom in
`ddtree_tui.model.todo` (the snapshot carries a TodoView). The names below are re-exported as this package's
API; the evidence rules are imported from `ddtree_tui.todo.evidence` (they read the bench history).
"""

from ddtree_tui.model.todo import (
    PRIORITIES,
    STATUSES,
    EvidenceState,
    ItemEvidence,
    Priority,
    Status,
    TodoAction,
    TodoEdit,
    TodoItem,
    TodoResult,
    TodoView,
)
from ddtree_tui.todo.model import (
    CHECK_HELP,
    DEFAULT_TODOS,
    GPU_METRICS,
    HOST_STATES,
    OPS,
    SERVICE_STATES,
    Check,
    CheckKind,
    TodoError,
    parse_check,
)
from ddtree_tui.todo.store import MAX_TODO_BYTES, TodoStore, merge_items

__all__ = [
    "CHECK_HELP",
    "DEFAULT_TODOS",
    "GPU_METRICS",
    "HOST_STATES",
    "MAX_TODO_BYTES",
    "OPS",
    "PRIORITIES",
    "SERVICE_STATES",
    "STATUSES",
    "Check",
    "CheckKind",
    "EvidenceState",
    "ItemEvidence",
    "Priority",
    "Status",
    "TodoAction",
    "TodoEdit",
    "TodoError",
    "TodoItem",
    "TodoResult",
    "TodoStore",
    "TodoView",
    "merge_items",
    "parse_check",
]

"""A todowrite-compatible checklist that cannot lie: items may carry evidence the core observes.

`model` (items, checks, the TodoEdit/TodoResult/TodoView shapes of the Fleet's door), `store` (the file:
atomic, locked, merging saves) and `evidence` (checks judged against the snapshot and bench runs). The names
below (model and store) are re-exported; the evidence rules are imported from `ddtree_tui.todo.evidence`, so
that the snapshot's models (state.py carries a TodoView) can import this package without pulling in the bench
history the evidence reads (bench -> state -> todo would otherwise be an import cycle at run time).
"""

from ddtree_tui.todo.model import (
    CHECK_HELP,
    DEFAULT_TODOS,
    GPU_METRICS,
    HOST_STATES,
    OPS,
    PRIORITIES,
    SERVICE_STATES,
    STATUSES,
    Check,
    CheckKind,
    EvidenceState,
    ItemEvidence,
    Priority,
    Status,
    TodoAction,
    TodoEdit,
    TodoError,
    TodoItem,
    TodoResult,
    TodoView,
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

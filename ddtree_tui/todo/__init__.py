"""A todowrite-compatible checklist that cannot lie: items may carry evidence the core observes.

`model` (items, checks, the TodoEdit/TodoResult/TodoView shapes of the Fleet's door), `store` (the file:
atomic, locked, merging saves) and `evidence` (checks judged against the snapshot and bench runs). The names
below are re-exported so `from ddtree_tui.todo import X` is the one import callers need.
"""

from ddtree_tui.bench.history import DEFAULT_HISTORY
from ddtree_tui.todo.evidence import (
    EvidenceContext,
    HistoryBenchContext,
    RunsContext,
    apply_auto_complete,
    bench_ok,
    bench_ok_from_history,
    check_evidence,
    evaluate,
    history_runs,
    todo_view,
)
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
    "DEFAULT_HISTORY",
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
    "EvidenceContext",
    "EvidenceState",
    "HistoryBenchContext",
    "ItemEvidence",
    "Priority",
    "RunsContext",
    "Status",
    "TodoAction",
    "TodoEdit",
    "TodoError",
    "TodoItem",
    "TodoResult",
    "TodoStore",
    "TodoView",
    "apply_auto_complete",
    "bench_ok",
    "bench_ok_from_history",
    "check_evidence",
    "evaluate",
    "history_runs",
    "merge_items",
    "parse_check",
    "todo_view",
]

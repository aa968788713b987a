"""`ddtree-tui todo list|add TEXT|start N|done N|cancel N|check`: the todo list from the shell.

No fleet runs in this mode, so it edits the store directly (the same `TodoStore.apply` the Fleet uses). The
model, store and evidence stay in `ddtree_tui.todo`; this handler prints, and builds a fleet snapshot only
when a check needs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

from ddtree_tui.bench.history import DEFAULT_HISTORY
from ddtree_tui.cli.args import TodoArgs
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, err, handler, profiles_of
from ddtree_tui.fleet import collect_snapshot
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.todo import (
    DEFAULT_TODOS,
    ItemEvidence,
    TodoAction,
    TodoEdit,
    TodoError,
    TodoItem,
    TodoStore,
    parse_check,
)
from ddtree_tui.todo.evidence import HistoryBenchContext, evaluate

MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]", "cancelled": "[-]"}
_ACTION: dict[str, TodoAction] = {"start": "start", "done": "complete", "cancel": "cancel"}


def _format_item(n: int, it: TodoItem) -> str:
    chk = f"   ⟨{it.check}⟩" if it.check else ""
    return f"{n:3d}. {MARK.get(it.status, '[?]')} {it.priority:<6} {it.content}{chk}"


def _build_context(args: TodoArgs, store: TodoStore) -> HistoryBenchContext:
    """A snapshot only when some check needs one: bench checks read the history file alone."""
    history = args.history or DEFAULT_HISTORY
    needs_fleet = False
    for it in store.items:
        if it.check:
            with contextlib.suppress(ValueError):
                needs_fleet |= parse_check(it.check).kind != "bench"
    snap = FleetSnapshot()
    if needs_fleet:
        snap = asyncio.run(collect_snapshot(profiles_of(args), float(args.timeout or 8.0)))
    return HistoryBenchContext(snap, Path(history))


def _index(arg: str | None, store: TodoStore) -> int:
    if arg is None or not arg.strip().isdigit():
        raise TodoError(f"expected an item number (1..{len(store.items)}), got {arg!r}")
    n = int(arg)
    if not 1 <= n <= len(store.items):
        raise TodoError(f"no item {n} (there are {len(store.items)})")
    return n - 1


def _print_check(store: TodoStore, evidence: list[ItemEvidence], as_json: bool) -> None:
    if as_json:
        rows = [
            {
                "n": ev.index + 1,
                "content": store.items[ev.index].content,
                "status": store.items[ev.index].status,
                "check": store.items[ev.index].check,
                **ev.model_dump(exclude={"index"}),
            }
            for ev in evidence
        ]
        print(json.dumps({"items": rows, "mismatches": sum(1 for e in evidence if e.mismatch)}))
        return
    for ev in evidence:
        line = f"{_format_item(ev.index + 1, store.items[ev.index])}\n       {ev.state}"
        if ev.detail:
            line += f": {ev.detail}"
        if ev.mismatch:
            line += f"\n       MISMATCH: {ev.mismatch}"
        print(line)


@handler("todo", TodoArgs)
def cli_main(args: TodoArgs) -> int:
    """`ddtree-tui todo list|add TEXT|start N|done N|cancel N|check`; exit 1 on an evidence mismatch."""
    path = Path(args.todos) if args.todos else DEFAULT_TODOS
    store = TodoStore(path)
    store.load()
    action, as_json = args.action, args.as_json
    if store.error:
        bak = store.backup_path
        fix = f"fix it or restore {bak.name}" if bak.is_file() else "fix it (there is no backup yet)"
        err(f"{store.error} (the file is left as it is; {fix})", "todo")
        return EXIT_USAGE
    try:
        if action == "list":
            if as_json:
                print(json.dumps(store.document(), indent=2, ensure_ascii=False))
            elif not store.items:
                print(f"no items in {path}")
            else:
                for n, it in enumerate(store.items, 1):
                    print(_format_item(n, it))
            return EXIT_OK
        if action == "add":
            if not args.arg:
                raise TodoError("todo add needs the item's TEXT")
            check = args.check_expr
            if check:
                parse_check(check)
            store.add(args.arg, priority=args.priority, check=check)
            store.save()
            print(_format_item(len(store.items), store.items[-1]))
            return EXIT_OK
        if action in _ACTION:
            idx = _index(args.arg, store)
            store.apply(TodoEdit(action=_ACTION[action], index=idx))
            store.save()
            print(_format_item(idx + 1, store.items[idx]))
            return EXIT_OK
        if action == "check":
            evidence = evaluate(store.items, _build_context(args, store))
            _print_check(store, evidence, as_json)
            return EXIT_FAIL if any(ev.mismatch for ev in evidence) else EXIT_OK
    except (TodoError, ValueError) as e:
        err(str(e), "todo")
        return EXIT_USAGE
    err(f"unknown action {action!r}", "todo")
    return EXIT_USAGE

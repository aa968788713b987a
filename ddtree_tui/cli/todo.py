"""`ddtree-tui todo list|add TEXT|start N|done N|cancel N|check`: the todo list from the shell.

The model, store and evidence stay in `ddtree_tui.todo`; this handler prints, and builds a fleet snapshot
only when a check needs one (importing it here is what keeps `todo` free of the fleet: no import cycle).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from ddtree_tui.state import FleetSnapshot
from ddtree_tui.todo import (
    DEFAULT_HISTORY,
    DEFAULT_TODOS,
    HistoryBenchContext,
    TodoError,
    TodoItem,
    TodoStore,
    evaluate,
    parse_check,
)

# --- headless CLI ---------------------------------------------------------------------------------------

MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]", "cancelled": "[-]"}


def _format_item(n: int, it: TodoItem) -> str:
    chk = f"   ⟨{it.check}⟩" if it.check else ""
    return f"{n:3d}. {MARK.get(it.status, '[?]')} {it.priority:<6} {it.content}{chk}"


def _build_context(ns: Any, store: TodoStore) -> HistoryBenchContext:
    """A snapshot only when some check needs one: bench checks read the history file alone."""
    history = getattr(ns, "history", None) or DEFAULT_HISTORY
    needs_fleet = False
    for it in store.items:
        if it.check:
            with contextlib.suppress(ValueError):
                needs_fleet |= parse_check(it.check).kind != "bench"
    snap = FleetSnapshot()
    if needs_fleet:
        import asyncio

        from ddtree_tui.commands import collect_snapshot
        from ddtree_tui.config import resolve_profiles

        profiles = resolve_profiles(ns.profile, ns.profiles, getattr(ns, "demo", False))
        snap = asyncio.run(collect_snapshot(profiles, float(getattr(ns, "timeout", None) or 8.0)))
    return HistoryBenchContext(snap, Path(history))


def _index(arg: str | None, store: TodoStore) -> int:
    if arg is None or not arg.strip().isdigit():
        raise TodoError(f"expected an item number (1..{len(store.items)}), got {arg!r}")
    n = int(arg)
    if not 1 <= n <= len(store.items):
        raise TodoError(f"no item {n} (there are {len(store.items)})")
    return n - 1


def cli_main(ns: Any) -> int:
    """`ddtree-tui todo list|add TEXT|start N|done N|cancel N|check`; exit 1 on an evidence mismatch."""
    path = Path(ns.todos) if getattr(ns, "todos", None) else DEFAULT_TODOS
    store = TodoStore(path)
    store.load()
    action = getattr(ns, "action", None) or "list"
    as_json = bool(getattr(ns, "json", False))
    if store.error:
        bak = store.backup_path
        fix = f"fix it or restore {bak.name}" if bak.is_file() else "fix it (there is no backup yet)"
        print(f"ddtree-tui todo: {store.error} (the file is left as it is; {fix})", file=sys.stderr)
        return 2
    try:
        if action == "list":
            if as_json:
                print(json.dumps(store.document(), indent=2, ensure_ascii=False))
            elif not store.items:
                print(f"no items in {path}")
            else:
                for n, it in enumerate(store.items, 1):
                    print(_format_item(n, it))
            return 0
        if action == "add":
            if not ns.arg:
                raise TodoError("todo add needs the item's TEXT")
            check = getattr(ns, "check_expr", None)
            if check:
                parse_check(check)
            store.add(ns.arg, priority=getattr(ns, "priority", None) or "medium", check=check)
            store.save()
            print(_format_item(len(store.items), store.items[-1]))
            return 0
        if action in ("start", "done", "cancel"):
            idx = _index(ns.arg, store)
            status = {"start": "in_progress", "done": "completed", "cancel": "cancelled"}[action]
            store.set_status(idx, status)
            store.save()
            print(_format_item(idx + 1, store.items[idx]))
            return 0
        if action == "check":
            from ddtree_tui.config import ProfileError

            try:
                ctx = _build_context(ns, store)
            except ProfileError as e:
                print(f"ddtree-tui todo: {e}", file=sys.stderr)
                return 2
            evidence = evaluate(store.items, ctx)
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
            else:
                for ev in evidence:
                    it = store.items[ev.index]
                    line = f"{_format_item(ev.index + 1, it)}\n       {ev.state}"
                    if ev.detail:
                        line += f": {ev.detail}"
                    if ev.mismatch:
                        line += f"\n       MISMATCH: {ev.mismatch}"
                    print(line)
            return 1 if any(ev.mismatch for ev in evidence) else 0
    except (TodoError, ValueError) as e:
        print(f"ddtree-tui todo: {e}", file=sys.stderr)
        return 2
    print(f"ddtree-tui todo: unknown action {action!r}", file=sys.stderr)
    return 2

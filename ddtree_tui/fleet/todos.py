"""The fleet's todo desk: the todo store, of which the fleet is the one writer while it runs (`apply`, the
auto-complete loop), one change at a time under its lock and saved off the event loop; evidence re-judged
against the snapshot and bench history every second (the history read only for the bench checks there are,
from its end); readers get the view the snapshot carries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from ddtree_tui.model.events import FleetEvent, Notice, TodoChanged
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.model.todo import ItemEvidence, TodoEdit, TodoResult, TodoView
from ddtree_tui.todo import TodoError, TodoStore
from ddtree_tui.todo.evidence import (
    VerdictsContext,
    apply_auto_complete,
    bench_keys,
    evaluate,
    history_verdicts,
    todo_view,
)


class Todos:
    """The todo list while a fleet runs; `snapshot` (the fleet's) is what evidence is judged against."""

    def __init__(
        self,
        todos_path: Path,
        history_path: Path,
        publish: Callable[[FleetEvent], None],
        snapshot: Callable[[], FleetSnapshot],
        auto_complete_todos: bool | None,
    ) -> None:
        self.history_path = history_path
        self._publish = publish
        self._snapshot = snapshot
        self.auto_complete_todos = auto_complete_todos
        self._evidence: list[ItemEvidence] = []
        self.todos = TodoStore(todos_path)
        self.todos.load()
        self._todo_lock = asyncio.Lock()
        self.view: TodoView = todo_view(self.todos)

    def todo_evidence(self) -> list[ItemEvidence]:
        return list(self._evidence)

    async def refresh_todos(self) -> bool:
        """Reload an externally changed file, re-evaluate evidence, auto-complete what the user allows;
        True when anything changed. Serialised with the intents (one writer)."""
        async with self._todo_lock:
            changed = await self._refresh_todos_locked()
        if changed:
            self._publish(TodoChanged())
        return changed

    async def _refresh_todos_locked(self) -> bool:
        changed = False
        try:
            changed = await asyncio.to_thread(self.todos.reload_if_changed)
        except OSError as e:  # pragma: no cover - reported
            self._publish(Notice(severity="warning", text=f"todo file not re-read: {e}"))
        keys = bench_keys(self.todos.items)
        verdicts = await asyncio.to_thread(history_verdicts, self.history_path, keys) if keys else {}
        ctx = VerdictsContext(self._snapshot(), verdicts)
        ev = evaluate(self.todos.items, ctx)
        if not self.todos.read_only:
            # None: the user's own switch in the todo file decides (off unless they turned it on)
            done = apply_auto_complete(self.todos, ev, allowed=self.auto_complete_todos, save=False)
            if done:
                changed = True
                try:
                    await asyncio.to_thread(self.todos.save)
                except TodoError as e:  # kept in memory (as before): the next save carries it
                    self._publish(Notice(severity="warning", text=f"todo auto-complete not saved: {e}"))
                ev = evaluate(self.todos.items, ctx)
        if ev != self._evidence:
            changed = True
        self._evidence = ev
        if changed:
            self.view = todo_view(self.todos, ev)
        return changed

    async def run_loop(self) -> None:
        while True:
            try:
                await self.refresh_todos()
            except Exception as e:  # pragma: no cover - reported
                self._publish(Notice(severity="warning", text=f"todo check failed: {e}"))
            await asyncio.sleep(1.0)

    async def todo_apply(self, edit: TodoEdit) -> TodoResult:
        """Make one change to the todo list and save it (merged with any edit made on disk meanwhile), in
        turn with the auto-complete merges; publishes TodoChanged. A failed save changes nothing."""
        async with self._todo_lock:
            if self.todos.read_only:
                return TodoResult(
                    ok=False,
                    message=f"todo {edit.action}: the todo file is read-only: {self.todos.error}",
                    suggestion="fix the file (or restore its .bak); it is re-read every second",
                )
            before = self.todos.checkpoint()
            try:
                res = self.todos.apply(edit)
            except TodoError as e:
                return TodoResult(ok=False, message=f"todo {edit.action}: {e}", invalid=True)
            try:
                await asyncio.to_thread(self.todos.save)
            except TodoError as e:
                self.todos.restore(before)
                return TodoResult(ok=False, message=f"todo {edit.action}: {e}")
            await self._refresh_todos_locked()
            self.view = todo_view(self.todos, self._evidence)
        self._publish(TodoChanged())
        return res

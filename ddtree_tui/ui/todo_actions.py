"""The app's todo actions: the add/edit dialogs and the delete confirm, and every change handed to the fleet
(the todo file's one writer) as a TodoEdit in a worker, in the order the user made them. Kept out of
ui/app.py so the view stays a layout and its keys."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ddtree_tui.model.intents import Todo
from ddtree_tui.model.todo import TodoEdit
from ddtree_tui.todo.model import parse_check
from ddtree_tui.ui.messages import TodoIntent
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.todo_edit import TodoDraft, TodoEditScreen
from ddtree_tui.ui.widgets.todos import TodosPane

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost


def check_problem(draft: TodoDraft) -> str | None:
    """A draft's evidence check in words when it does not parse (shown in the dialog, which stays open)."""
    if not draft.check.strip():
        return None
    try:
        parse_check(draft.check)
    except ValueError as e:
        return str(e)
    return None


class TodoActions:
    """What the app does for a TodoIntent or the `t` key; the UI never saves the file itself."""

    def __init__(self, app: AppHost) -> None:
        self.app = app
        self._lock = asyncio.Lock()

    def new(self, draft: TodoDraft | None = None, error: str = "") -> None:
        """The add dialog (again with `draft` and the fleet's `error` when it refused what was typed)."""

        def add(d: TodoDraft | None) -> None:
            if d is not None:
                edit = TodoEdit(action="add", content=d.content, priority=d.priority, check=d.check or None)
                self.apply(edit, lambda err: self.new(d, err))

        d = draft or TodoDraft(content="")
        screen = TodoEditScreen(
            "New todo", d.content, d.priority, d.check, validate=check_problem, error=error
        )
        self.app.push_screen(screen, add)

    def on_intent(self, msg: TodoIntent) -> None:
        app = self.app
        items = app.fleet.snapshot().todos.items
        i = msg.index
        if msg.verb == "add":
            self.new()
        elif i is None or not 0 <= i < len(items):
            app.bell()
        elif msg.verb == "edit":

            def reopen(d: TodoDraft, error: str) -> None:
                screen = TodoEditScreen(
                    f"Edit todo {i + 1}", d.content, d.priority, d.check, validate=check_problem, error=error
                )
                app.push_screen(screen, edit)

            def edit(d: TodoDraft | None) -> None:
                if d is not None:
                    change = TodoEdit(
                        action="edit", index=i, content=d.content, priority=d.priority, check=d.check
                    )
                    self.apply(change, lambda err: reopen(d, err))

            it = items[i]
            reopen(TodoDraft(content=it.content, priority=it.priority, check=it.check or ""), "")
        elif msg.verb == "delete":

            def delete(ok: bool | None) -> None:
                if ok:
                    self.apply(TodoEdit(action="delete", index=i))

            app.push_screen(ConfirmScreen(f"Delete todo {i + 1}?", items[i].content, "Delete"), delete)
        else:
            self.apply(TodoEdit(action=msg.verb, index=i))

    def apply(self, edit: TodoEdit, again: Callable[[str], None] | None = None) -> None:
        """Hand the change to the fleet in a worker: no file I/O on the UI path. `again(error)`: what to do
        when the fleet finds the entry invalid (reopen the dialog with what was typed)."""
        self.app.run_worker(self._send(edit, again), group="todo-save")

    async def _send(self, edit: TodoEdit, again: Callable[[str], None] | None = None) -> None:
        app = self.app
        async with self._lock:  # the user's edits reach the fleet in the order they were made
            try:
                res = await app.fleet.do(Todo(edit=edit))
            except Exception as e:
                app.notify(f"todo not saved: {e}", severity="error", timeout=10)
                return
        if not res.ok:
            if res.invalid and again is not None:  # nothing typed is lost: the dialog again, saying why
                again(res.message)
                return
            app.notify(res.message, severity="error" if res.invalid else "warning", timeout=10)
            return
        app.ctl.dirty.add("todos")
        app.flush()
        if res.todo is not None and res.todo.index is not None:
            app.query_one(TodosPane).cursor_to(res.todo.index)

"""The app's todo actions: the add/edit dialogs and the delete confirm, and every change handed to the fleet
(the todo file's one writer) as a TodoEdit in a worker, in the order the user made them. Kept out of
ui/app.py so the view stays a layout and its keys."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ddtree_tui.model.intents import Todo
from ddtree_tui.model.todo import TodoEdit
from ddtree_tui.ui.messages import TodoIntent
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.todo_edit import TodoDraft, TodoEditScreen
from ddtree_tui.ui.widgets.todos import TodosPane

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost


class TodoActions:
    """What the app does for a TodoIntent or the `t` key; the UI never saves the file itself."""

    def __init__(self, app: AppHost) -> None:
        self.app = app
        self._lock = asyncio.Lock()

    def new(self) -> None:
        def add(d: TodoDraft | None) -> None:
            if d is not None:
                self.apply(
                    TodoEdit(action="add", content=d.content, priority=d.priority, check=d.check or None)
                )

        self.app.push_screen(TodoEditScreen("New todo"), add)

    def on_intent(self, msg: TodoIntent) -> None:
        app = self.app
        items = app.fleet.snapshot().todos.items
        i = msg.index
        if msg.verb == "add":
            self.new()
        elif i is None or not 0 <= i < len(items):
            app.bell()
        elif msg.verb == "edit":

            def edit(d: TodoDraft | None) -> None:
                if d is not None:
                    self.apply(
                        TodoEdit(
                            action="edit", index=i, content=d.content, priority=d.priority, check=d.check
                        )
                    )

            it = items[i]
            app.push_screen(TodoEditScreen(f"Edit todo {i + 1}", it.content, it.priority, it.check), edit)
        elif msg.verb == "delete":

            def delete(ok: bool | None) -> None:
                if ok:
                    self.apply(TodoEdit(action="delete", index=i))

            app.push_screen(ConfirmScreen(f"Delete todo {i + 1}?", items[i].content, "Delete"), delete)
        else:
            self.apply(TodoEdit(action=msg.verb, index=i))

    def apply(self, edit: TodoEdit) -> None:
        """Hand the change to the fleet in a worker: no file I/O on the UI path."""
        self.app.run_worker(self._send(edit), group="todo-save")

    async def _send(self, edit: TodoEdit) -> None:
        app = self.app
        async with self._lock:  # the user's edits reach the fleet in the order they were made
            try:
                res = await app.fleet.do(Todo(edit=edit))
            except Exception as e:
                app.notify(f"todo not saved: {e}", severity="error", timeout=10)
                return
        if not res.ok:
            app.notify(res.message, severity="error" if res.invalid else "warning", timeout=10)
            return
        app.ctl.dirty.add("todos")
        app.flush()
        if res.todo is not None and res.todo.index is not None:
            app.query_one(TodosPane).cursor_to(res.todo.index)

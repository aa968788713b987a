"""Todo checklist pane: status, priority, text and the evidence flag (verified / failing / mismatch), painted
from a TodosView (the fleet's `todos`, built by the controller). Keys post TodoIntents; the App hands them to
the fleet as TodoEdits."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from ddtree_tui.model.todo import ItemEvidence, TodoItem
from ddtree_tui.ui.messages import TodoIntent
from ddtree_tui.ui.views import TodosView
from ddtree_tui.ui.widgets.base import CellText, KeyedTable, PaintedRow, Pane, matches, sync_table

STATUS_MARK = {
    "pending": ("[ ]", "dim"),
    "in_progress": ("[~]", "warn"),
    "completed": ("[x]", "ok"),
    "cancelled": ("[-]", "dim"),
}
PRIORITY_BADGE = {"high": "bad", "medium": "warn", "low": "dim"}
EVIDENCE_BADGE = {
    "verified": ("✓ verified", "ok"),
    "failing": ("✗ failing", "bad"),
    "unknown": ("? unknown", "warn"),
    "none": ("", "dim"),
}


class TodosPane(Pane):
    pane_number = 4
    pane_title = "Todos"
    DEFAULT_CSS = "TodosPane #todos-flags { height: auto; max-height: 4; }"
    BINDINGS = [
        Binding("e", "todo('edit')", "Edit"),
        Binding("s", "todo('start')", "Start"),
        Binding("c", "todo('complete')", "Complete"),
        Binding("space", "todo('toggle')", "Toggle done"),
        Binding("ctrl+d,delete", "todo('delete')", "Delete", tooltip="delete the item (asks first)"),
        Binding("shift+up,K", "todo('up')", "Move up"),
        Binding("shift+down,J", "todo('down')", "Move down"),
        # j/k move the cursor as in every table (ui/navigation.py); J/K move the item
    ]

    def compose(self) -> ComposeResult:
        yield Static("", id="todos-error")
        yield Static("", id="todos-flags")
        t: DataTable[Any] = KeyedTable(id="todos-table", cursor_type="row")
        t.add_columns("#", "Status", "Pri", "Todo", "Evidence")
        yield t

    def action_todo(self, verb: str) -> None:
        t = self.query_one(DataTable)
        index = None
        if t.row_count:
            try:
                index = int(str(t.coordinate_to_cell_key(Coordinate(t.cursor_row, 0)).row_key.value))
            except Exception:
                index = None
        if index is None:
            self.app.bell()
            return
        self.post_message(TodoIntent(verb, index))  # type: ignore[arg-type]

    def cursor_to(self, index: int) -> None:
        t = self.query_one(DataTable)
        try:
            t.move_cursor(row=t.get_row_index(str(index)), animate=False)
        except Exception:
            pass

    def show_view(self, view: TodosView) -> None:
        todos = view.todos
        evidence = {e.index: e for e in todos.evidence}
        err = self.query_one("#todos-error", Static)
        problem = todos.error
        msg = (f"read-only: {problem}" if todos.read_only else problem) or ""
        err.update(self.t(msg, "bad") if msg else "")
        err.display = bool(msg)
        rows: list[PaintedRow] = []
        for i, it in enumerate(todos.items):
            mark, badge = STATUS_MARK.get(it.status, (it.status, "dim"))
            ev = evidence.get(i)
            if ev is not None and ev.mismatch:
                evtext = self.t(f"! {ev.mismatch}", "bad")
            elif ev is not None:
                label, eb = EVIDENCE_BADGE.get(ev.state, (ev.state, "dim"))
                evtext = self.t(f"{label} {ev.detail}".strip() if ev.state != "none" else "", eb)
            else:
                evtext = self.t(it.check or "", "dim")
            cells: list[CellText] = [
                str(i + 1),
                self.t(mark, badge),
                self.t(it.priority, PRIORITY_BADGE.get(it.priority, "dim")),
                self.t(it.content, "dim" if it.status in ("completed", "cancelled") else None),
                evtext,
            ]
            if matches(view.filter, it.content, it.status, it.priority, it.check):
                rows.append((str(i), cells))
        n = len(todos.items)
        done = sum(1 for it in todos.items if it.status == "completed")
        f = view.filter
        self.border_title = f"{self.pane_number} Todos · {done}/{n} done" + (f" · filter /{f}" if f else "")
        if not n and not msg:
            err.update(
                self.t("no todos yet: t adds one (a check like `service HOST/SVC ready` is verified)", "dim")
            )
            err.display = True
        sync_table(self.query_one(DataTable), rows)
        self._flags(todos.items, evidence)

    def _flags(self, items: list[TodoItem], evidence: dict[int, ItemEvidence]) -> None:
        """Every mismatch flag in full under the table: a narrow pane cuts the Evidence column."""
        out = Text()
        for i, _it in enumerate(items):
            ev = evidence.get(i)
            if ev is not None and ev.mismatch:
                if out:
                    out.append("\n")
                out.append(f"! {i + 1}: ", self.style_of("bad"))
                out.append(str(ev.mismatch), self.style_of("bad"))
        box = self.query_one("#todos-flags", Static)
        box.update(out)
        box.display = bool(out) and self.is_narrow()

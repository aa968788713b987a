"""Add or edit a todo: text, priority and an optional evidence check (e.g. `service ct200/dflash ready`). A bad
entry (empty text, a check that does not parse) is said in place and the dialog stays open with what was
typed; `error` opens it showing a problem the fleet found after it closed."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from ddtree_tui.model.todo import Priority
from ddtree_tui.ui.screens.form import form_buttons, steady_inputs


class TodoDraft(BaseModel):
    """What the dialog was saved with; the App turns it into a TodoEdit for the fleet."""

    content: str
    priority: Priority = "medium"
    check: str = ""


class TodoEditScreen(ModalScreen[TodoDraft | None]):
    DEFAULT_CSS = """
    TodoEditScreen { align: center middle; }
    TodoEditScreen > #dialog { width: 72; max-width: 95%; height: auto; padding: 1 2;
        border: thick $accent; background: $surface; }
    TodoEditScreen Input, TodoEditScreen Select { margin-bottom: 1; }
    TodoEditScreen #buttons { height: auto; align-horizontal: right; }
    TodoEditScreen #todo-error { color: $error; height: auto; width: 1fr; margin-bottom: 1; }
    TodoEditScreen #todo-error.-empty { display: none; }
    TodoEditScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self,
        title: str,
        content: str = "",
        priority: str = "medium",
        check: str | None = None,
        *,
        validate: Callable[[TodoDraft], str | None] | None = None,
        error: str = "",
    ) -> None:
        """`validate`: a draft's problem in words (None when it may be saved); `error`: shown at once."""
        super().__init__()
        self.validate = validate
        self.error = error
        self.title_text = title
        self.content = content
        self.priority = priority
        self.check = check or ""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text)
            yield Input(self.content, placeholder="what needs doing", id="content")
            yield Select(
                [("high", "high"), ("medium", "medium"), ("low", "low")],
                value=self.priority,
                allow_blank=False,
                id="priority",
            )
            yield Input(
                self.check, placeholder="evidence, e.g. service local/dflash ready (optional)", id="check"
            )
            yield Label(self.error, id="todo-error", classes="" if self.error else "-empty")
            yield from form_buttons("Save", "save")

    def on_mount(self) -> None:
        steady_inputs(self)
        self.query_one("#content", Input).focus()

    def _result(self) -> TodoDraft:
        return TodoDraft.model_validate(
            {
                "content": self.query_one("#content", Input).value,
                "priority": str(self.query_one("#priority", Select).value),
                "check": self.query_one("#check", Input).value,
            }
        )

    def _save(self) -> None:
        """Close with the draft, or say what is wrong in place and keep everything typed."""
        draft = self._result()
        problem = "write what needs doing" if not draft.content.strip() else None
        if problem is None and self.validate is not None:
            problem = self.validate(draft)
        label = self.query_one("#todo-error", Label)
        if problem:
            label.update(problem)
            label.remove_class("-empty")
            self.query_one("#check" if draft.content.strip() else "#content", Input).focus()
            return
        self.dismiss(draft)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "save":
            self._save()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

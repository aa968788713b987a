"""Choose what to benchmark: services, prompt set, repeats, max new tokens and the baseline."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, SelectionList

PROMPT_SETS = ["seed3", "agentic", "longctx"]


class BenchSetupScreen(ModalScreen[dict[str, Any] | None]):
    DEFAULT_CSS = """
    BenchSetupScreen { align: center middle; }
    BenchSetupScreen > #dialog { width: 76; max-width: 95%; height: auto; max-height: 95%; padding: 0 2;
        border: thick $accent; background: $surface; }
    BenchSetupScreen SelectionList { height: auto; max-height: 8; }
    BenchSetupScreen #row { height: auto; }
    BenchSetupScreen #row > * { width: 1fr; }
    BenchSetupScreen #labels { height: 1; margin-top: 1; }
    BenchSetupScreen #labels > * { width: 1fr; padding: 0 1; }
    BenchSetupScreen .field-label { color: $text-muted; }
    BenchSetupScreen #buttons { height: auto; align-horizontal: right; }
    BenchSetupScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+r", "run", "Run")]

    def __init__(self, refs: list[tuple[str, str]], preselect: list[str]) -> None:
        """refs: (HOST/SVC, state) of every service; preselect: the ones ticked at first."""
        super().__init__()
        self.refs = refs
        self.preselect = preselect

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Benchmark: tick services (space), then Run (ctrl+r)")
            yield SelectionList[str](
                *[(f"{r}  ({st})", r, r in self.preselect) for r, st in self.refs], id="services"
            )
            with Horizontal(id="labels"):
                yield Label("prompt set", classes="field-label")
                yield Label("repeats (per prompt)", classes="field-label")
                yield Label("max new tokens", classes="field-label")
            with Horizontal(id="row"):
                yield Select([(p, p) for p in PROMPT_SETS], value="seed3", allow_blank=False, id="prompts")
                yield Input("1", placeholder="repeats", id="repeats", type="integer", tooltip="repeats")
                yield Input("128", placeholder="max new tokens", id="max-tokens", type="integer")
            yield Label("baseline (Δ columns are relative to it)", classes="field-label")
            baseline_opts = [(r, r) for r, _ in self.refs]
            yield Select(baseline_opts, prompt="baseline: first selected", id="baseline")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Run", id="run", variant="primary")

    def on_mount(self) -> None:
        for inp in self.query(Input):
            inp.cursor_blink = False
        self.query_one(SelectionList).focus()

    def action_run(self) -> None:
        refs = list(self.query_one(SelectionList).selected)
        if not refs:
            self.notify("tick at least one service", severity="warning")
            return
        baseline = self.query_one("#baseline", Select).value
        try:
            repeats = max(1, int(self.query_one("#repeats", Input).value or 1))
            max_tokens = max(1, int(self.query_one("#max-tokens", Input).value or 128))
        except ValueError:
            self.notify("repeats and max new tokens are whole numbers", severity="error")
            return
        self.dismiss(
            {
                "refs": refs,
                "prompt_set": str(self.query_one("#prompts", Select).value),
                "repeats": repeats,
                "max_new_tokens": max_tokens,
                "baseline": baseline if isinstance(baseline, str) else None,
            }
        )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "run":
            self.action_run()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

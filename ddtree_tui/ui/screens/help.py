"""`?`: every key binding, grouped by where it works, read from the live binding tables so it cannot drift."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from ddtree_tui.ui.keys import NAVIGATION_KEYS, to_bindings

KEY_NAMES = {"slash": "/", "question_mark": "?", "space": "space", "escape": "Esc", "delete": "Del"}

NAVIGATION = to_bindings(NAVIGATION_KEYS)

# one line for each word of jargon the screens use
TERMS = [
    ("DFlash", "speculative decoding with a block draft model (SGLang --speculative-algorithm DFLASH)"),
    ("DDTree", "DFlash with a draft tree; mode tree (a real tree) or shadow-linear (a one-branch 'tree', "
     "for comparing the machinery against linear DFlash)"),
    ("accept length", "tokens accepted per verify pass of the target model (higher: faster decoding)"),
    ("tok/s", "output tokens per second; in the bench summary the mean of the per-prompt medians"),
    ("TTFT", "time to first token: from sending the request to the first streamed text"),
    ("Δ vs base", "tok/s relative to the baseline service of the run"),
    ("SIMULATED / SIM", "a stand-in SGLang server (ddtree-tui sim): same API and logs, no model, no GPU"),
    ("REPLAY", "GPU telemetry played back from a real H200 recording, not measured live"),
    ("New todo (t)", "add a checklist item; a check like `service HOST/SVC ready` is verified live"),
]  # fmt: skip


def _binding_rows(groups: Iterable[tuple[str, Iterable[object]]]) -> list[tuple[str, str, str]]:
    """(where, keys, what) for every binding with a description."""
    rows: list[tuple[str, str, str]] = []
    for where, bindings in groups:
        for b in bindings:
            if not isinstance(b, Binding):
                continue
            keys = ", ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in b.key.split(","))
            rows.append((where, keys, b.tooltip or b.description or b.action))
    return rows


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #dialog { width: 95%; max-width: 120; height: 95%; border: thick $accent;
        background: $surface; padding: 0 1; }
    HelpScreen #help-scroll { height: 1fr; }
    """
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close help")]

    def __init__(self, groups: Sequence[tuple[str, Iterable[object]]]) -> None:
        super().__init__()
        self.rows = _binding_rows(groups)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Keys (Esc or ? closes) · ctrl+p: every action for every host and service")
            with VerticalScroll(id="help-scroll"):
                yield Static(self.table(), id="help-table")

    def table(self) -> Table:
        """Sections (a title line each, not a column repeating it), keys, and what they do, wrapped: a
        narrow terminal wraps the text instead of cutting it."""
        t = Table(box=None, show_header=False, expand=True, padding=(0, 1))
        t.add_column("keys", no_wrap=True, style="bold")
        t.add_column("what", ratio=1)
        where = None
        for group, keys, what in self.rows:
            if group != where:
                where = group
                t.add_row("", Text(group, style="bold reverse"))
            t.add_row(keys, what)
        t.add_row("", Text("terms", style="bold reverse"))
        for term, meaning in TERMS:
            t.add_row(term, meaning)
        return t

    def on_mount(self) -> None:
        self.query_one("#help-scroll", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)

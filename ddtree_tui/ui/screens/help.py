"""`?`: every key of the current screen, grouped by where it works, read from the live binding tables (each
class's merged BINDINGS, inherited ones included) so it cannot drift; tests compare it with the screen's
active bindings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static

from ddtree_tui.bench.report import TOK_S_MEAN_NOTE
from ddtree_tui.ui.keys import NAV_KEYS, NAVIGATION_KEYS, to_bindings

KEY_NAMES = {
    "slash": "/",
    "question_mark": "?",
    "colon": ":",
    "space": "space",
    "escape": "Esc",
    "delete": "Del",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "home": "Home",
    "end": "End",
}

NAVIGATION = [*to_bindings(NAV_KEYS), *to_bindings(NAVIGATION_KEYS)]

# one line for each word of jargon the screens use
TERMS = [
    ("DFlash", "speculative decoding with a block draft model (SGLang --speculative-algorithm DFLASH)"),
    ("DDTree", "DFlash with a draft tree; mode tree (a real tree) or shadow-linear (a one-branch 'tree', "
     "for comparing the machinery against linear DFlash)"),
    ("accept length", "tokens accepted per verify pass of the target model (higher: faster decoding)"),
    ("tok/s", f"output tokens per second; in the bench summary {TOK_S_MEAN_NOTE} (as under the headless "
     "table); Δ vs base is of that same number; `median` is over all requests"),
    ("TTFT", "time to first token: from sending the request to the first streamed text"),
    ("Δ vs base", "tok/s relative to the baseline service of the run"),
    ("SIMULATED / SIM", "a stand-in SGLang server (ddtree-tui sim): same API and logs, no model, no GPU"),
    ("REPLAY", "GPU telemetry played back from a real H200 recording, not measured live"),
    ("New todo (t)", "add a checklist item; a check like `service HOST/SVC ready` is verified live"),
]  # fmt: skip


def key_label(key: str) -> str:
    return KEY_NAMES.get(key.strip(), key.strip())


def merged(cls: type[DOMNode]) -> list[Binding]:
    """A class's bindings with the inherited ones (what Textual really binds), one entry a declaration."""
    by_action: dict[tuple[str, str, str], list[Binding]] = {}
    for bindings in cls._merge_bindings().key_to_bindings.values():
        for b in bindings:  # one declaration ("x,delete") comes back one Binding a key: joined again here
            by_action.setdefault((b.action, b.description, b.tooltip), []).append(b)
    base = {(b.action, b.key) for bs in Screen._merge_bindings().key_to_bindings.values() for b in bs}
    out = []
    for group in by_action.values():
        first = group[0]
        if issubclass(cls, Screen) and cls is not Screen and (first.action, first.key) in base:
            continue  # every screen's Tab / copy: listed once, under "moving around"
        if not (first.description or first.tooltip):
            continue  # Textual's silent ones (ctrl+c's "press q"): in "moving around" too
        keys = ",".join(dict.fromkeys(b.key for b in group))
        out.append(Binding(keys, first.action, first.description, show=first.show, tooltip=first.tooltip))
    return out


def _is_nav(b: Binding) -> bool:
    return b.action.startswith("nav(")


def main_groups(app_cls: type[App[Any]]) -> list[tuple[str, list[Binding]]]:
    """(where, bindings) of the main screen: the app's keys, each pane's, movement, and the dialogs'. From
    the classes alone, so README's key table is generated from the same list (readme_key_table)."""
    from ddtree_tui.ui.layout import PANE_CLASSES
    from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
    from ddtree_tui.ui.screens.confirm import ConfirmScreen
    from ddtree_tui.ui.screens.doctor import DoctorScreen
    from ddtree_tui.ui.sweep_screen import SweepScreen

    groups = [("everywhere on the main screen", [b for b in merged(app_cls) if not _is_nav(b)])]
    for n, cls in PANE_CLASSES.items():
        own = merged(cls)
        if own:
            groups.append((f"in the {cls.pane_title} pane (key {n})", own))
    groups.append(("moving around (every table, list, log and dialog)", list(NAVIGATION)))
    groups.append(("in the confirm dialog", merged(ConfirmScreen)))
    groups.append(("in the bench dialog (b)", merged(BenchSetupScreen)))
    groups.append(("in the doctor dialog (D)", merged(DoctorScreen)))
    groups.append(("in the sweep screen (w)", merged(SweepScreen)))
    return groups


def help_groups(app: App[Any], screen: Screen[Any]) -> list[tuple[str, list[Binding]]]:
    """(where, bindings) for `?` on `screen`: the main screen's groups (main_groups); any other screen its
    own keys, movement, and the app keys that work there."""
    if screen is app.screen_stack[0]:
        return main_groups(type(app))
    app_keys = [b for b in merged(type(app)) if not _is_nav(b)]
    name = type(screen).__name__.removesuffix("Screen").lower() or "this"
    active = screen.active_bindings  # the app's keys that really work here (check_action says which)
    anywhere = [
        b
        for b in app_keys
        if any(
            k in active and active[k].enabled and active[k].binding.action == b.action
            for k in b.key.split(",")
        )
    ]
    moving = ("moving around (every table, list, log and dialog)", list(NAVIGATION))
    return [(f"on the {name} screen", merged(type(screen))), moving, ("everywhere", anywhere)]


def readme_key_table(app_cls: type[App[Any]]) -> str:
    """README's key table (between its `keys:start`/`keys:end` markers), made from main_groups; a test
    compares the README with it, so the README cannot drift from the bindings either."""
    lines = ["| where | keys | what |", "| --- | --- | --- |"]
    for where, keys, what in binding_rows(main_groups(app_cls)):
        shown = ", ".join(f"`{k.strip()}`" for k in keys.split(", "))
        cells = [c.replace("|", "\\|") for c in (where, shown, what)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def binding_rows(groups: Iterable[tuple[str, Iterable[object]]]) -> list[tuple[str, str, str]]:
    """(where, keys, what) for every binding with a description."""
    rows: list[tuple[str, str, str]] = []
    for where, bindings in groups:
        for b in bindings:
            if not isinstance(b, Binding):
                continue
            keys = ", ".join(key_label(k) for k in b.key.split(","))
            rows.append((where, keys, b.tooltip or b.description or b.action))
    return rows


def listed_keys(groups: Iterable[tuple[str, Iterable[object]]]) -> set[str]:
    """Every key the help lists (as Textual names it): what tests compare with the active bindings."""
    return {k.strip() for _, bs in groups for b in bs if isinstance(b, Binding) for k in b.key.split(",")}


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
        self.groups = [(where, list(bs)) for where, bs in groups]
        self.rows = binding_rows(self.groups)
        self.keys = listed_keys(self.groups)

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

"""The keys, as tables: one row a key (keys, action, description, shown in the footer, tooltip). The app's
BINDINGS and the help screen's navigation list are built from them, so `?` lists what the keys really do."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding

KeyRow = tuple[str, str, str, bool, str]

MAIN_KEYS: tuple[KeyRow, ...] = (
    ("1", "focus_pane(1)", "Hosts", False, "focus the hosts pane"),
    ("2", "focus_pane(2)", "GPUs", False, "focus the GPU pane"),
    ("3", "focus_pane(3)", "Services", False, "focus the services pane"),
    ("4", "focus_pane(4)", "Todos", False, "focus the todo checklist"),
    ("5", "focus_pane(5)", "Bench", False, "focus the benchmark pane"),
    ("6", "focus_pane(6)", "Logs", False, "focus the log pane"),
    ("l", "service('launch')", "Launch", True, "launch the selected service"),
    # destructive keys are ctrl+letters (k9s): j/k/g/G are movement everywhere
    ("ctrl+k", "service('kill')", "Kill", True, "kill the selected service (asks; Cancel is the default)"),
    ("r", "service('restart')", "Restart", True, "redeploy the selected service (asks)"),
    ("m", "service('move')", "Move", True, "move the selected service to another host (asks)"),
    ("b", "bench", "Bench", True, "benchmark: pick services and a prompt set, run"),
    ("L", "logs", "Logs", True, "show and follow the selected service's log"),
    ("D", "doctor", "Doctor", False, "doctor: preflight checks of the selected host"),
    ("t", "new_todo", "New todo", True, "add an item to the todo checklist"),
    ("w", "sweep", "Sweep", False, "the tuning lab for the selected service (sweep screen)"),
    ("slash", "filter", "Filter", False, "filter the focused pane: regex or substring, !text inverts"),
    (
        "colon",
        "command",
        "Command",
        False,
        "command mode: :hosts :gpus :svc :bench :sweep :logs SVC :host NAME",
    ),
    ("T", "cycle_theme", "Theme", False, "next colour theme"),
    ("R", "reload_profiles", "Reload", False, "re-read the host profiles from disk"),
    ("question_mark", "help", "Help", True, "this list of keys"),
    ("H", "messages", "Messages", False, "every message of this session (history)"),
    ("ctrl+p", "command_palette", "Commands", False, "every action for every host and service"),
    ("q", "quit", "Quit", True, "stop what this session started (demo) and leave"),
    ("escape", "clear_filter", "Clear filter", False, "clear the filter"),
)

# issue 28 (K2): stopping what runs. A plain run, ladder or soak stops as Ctrl-C stops it headless (what was
# measured is saved, marked interrupted); Esc does the same in the Bench pane while a run is in flight.
RUN_KEYS: tuple[KeyRow, ...] = (
    ("x", "stop_run", "Stop", False, "stop the bench, ladder or soak in flight (saves what was measured)"),
)


def _nav(keys: str, tip: str) -> KeyRow:
    """A key Textual handles itself: no action of ours, listed in the help screen only."""
    return (keys, "-", "", True, tip)


# movement, the same in every table, list, log and scrolling screen (ui/navigation.py); bound with priority
# on the app, and passed on (to the input, button or pane that owns the key) where it means nothing
NAV_KEYS: tuple[KeyRow, ...] = (
    ("j", "nav('j')", "Down", False, "cursor down (a table) / scroll down (a log, a detail screen)"),
    ("k", "nav('k')", "Up", False, "cursor up / scroll up"),
    ("g", "nav('g')", "Top", False, "first row / top"),
    ("G", "nav('G')", "Bottom", False, "last row / bottom (in the log: the tail, following again)"),
    ("home", "nav('home')", "Top", False, "first row / top (a table's cursor too, not only its view)"),
    ("end", "nav('end')", "Bottom", False, "last row / bottom"),
)

# keys every table and dialog understands (Textual's own), listed so nobody has to guess them
NAVIGATION_KEYS: tuple[KeyRow, ...] = (
    _nav("up,down,pageup,pagedown", "move the cursor in the focused table / scroll the focused pane"),
    _nav("left,right", "scroll a wide table sideways"),
    _nav("ctrl+pageup,ctrl+pagedown", "scroll a page left / right"),
    _nav("ctrl+home,ctrl+end", "scroll a table to its top / bottom without moving the cursor"),
    _nav(
        "tab,shift+tab",
        "next / previous widget: every table of a pane (Bench: live, results, per-prompt, history), "
        "and in dialogs the next field or button",
    ),
    _nav("enter", "open: drill into a host, GPU or service (Esc goes back)"),
    _nav("space", "tick in a list (bench dialog), toggle done (todos)"),
    _nav("escape", "back, close a dialog, clear the filter"),
    _nav("ctrl+c", "quit, like q (in a text field: copy the selected text)"),
    _nav("super+c", "copy the selected text"),
)

# actions that only make sense on the main screen (not while a dialog is open)
MAIN_ONLY = frozenset(
    {
        "messages",
        "service",
        "bench",
        "logs",
        "doctor",
        "new_todo",
        "filter",
        "focus_pane",
        "help",
        "cycle_theme",
        "sweep",
        "command",
    }
)


def to_bindings(rows: Iterable[KeyRow], *, priority: bool = False) -> list[Binding]:
    return [
        Binding(keys, action, text, show=show, tooltip=tip, priority=priority)
        for keys, action, text, show, tip in rows
    ]

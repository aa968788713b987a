"""Command mode (`:`, as in k9s): a one-line prompt at the bottom that jumps where a name says, `:hosts`,
`:gpus [HOST]`, `:svc`, `:todos`, `:bench`, `:sweep [SVC]`, `:logs SVC`, `:host NAME`, `:help`. Tab completes
the command, a host or a service (a bare service name becomes HOST/SVC), the inline suggestion shows what Tab
would give, Up/Down walk the history of this session. Parsing and completion are pure functions of the names
the fleet has now, so they are tested without an app."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Label

from ddtree_tui.ui.palette import open_sweep

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost


@dataclass(frozen=True)
class Names:
    """What a command can name: the fleet's hosts and services (HOST/SVC) as the snapshot has them now."""

    hosts: tuple[str, ...]
    refs: tuple[str, ...]


# command -> (what its argument names: "host", "ref" or "", what it does); aliases map to these
COMMANDS: dict[str, tuple[str, str]] = {
    "hosts": ("", "the hosts pane"),
    "gpus": ("host", "the GPU pane (with HOST: that host's GPUs only)"),
    "svc": ("", "the services pane"),
    "todos": ("", "the todo checklist"),
    "bench": ("", "the benchmark pane"),
    "logs": ("ref", "the log pane (with SVC: that service's log)"),
    "sweep": ("ref", "the sweep screen (tuning lab) for SVC or the selected service"),
    "host": ("host", "the hosts pane with the cursor on NAME"),
    "help": ("", "every key (?)"),
}
ALIASES = {"services": "svc", "service": "svc", "gpu": "gpus", "log": "logs", "todo": "todos", "h": "help"}
PANE_OF = {"hosts": 1, "host": 1, "gpus": 2, "svc": 3, "todos": 4, "bench": 5, "logs": 6}


class CommandError(ValueError):
    """A command that cannot run: unknown, or naming a host or service the fleet does not have."""


def names_of(app: AppHost) -> Names:
    snap = app.current_snapshot()
    hosts = [h.name for h in snap.hosts] or [p.name for p in app.fleet.profiles()]
    refs = [f"{h.name}/{s.name}" for h in snap.hosts for s in h.services]
    if not refs:
        refs = [f"{p.name}/{s.name}" for p in app.fleet.profiles() for s in p.services]
    return Names(tuple(hosts), tuple(refs))


def resolve_ref(arg: str, names: Names) -> str:
    """HOST/SVC as given, or a bare SVC that one host has."""
    if arg in names.refs:
        return arg
    hits = [r for r in names.refs if r.split("/", 1)[1] == arg]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise CommandError(f"{arg!r} is on several hosts: {', '.join(hits)} (say HOST/{arg})")
    raise CommandError(f"no service {arg!r} (known: {', '.join(names.refs) or 'none'})")


def parse(text: str, names: Names) -> tuple[str, str | None]:
    """`:logs dflash` -> ("logs", "local/dflash"): the command and its resolved argument, or CommandError."""
    words = text.strip().removeprefix(":").split()
    if not words:
        raise CommandError("empty command")
    cmd = ALIASES.get(words[0].lower(), words[0].lower())
    if cmd not in COMMANDS:
        raise CommandError(f"unknown command :{words[0]} (known: {', '.join(':' + c for c in COMMANDS)})")
    kind = COMMANDS[cmd][0]
    arg = " ".join(words[1:]) or None
    if arg is not None and not kind:
        raise CommandError(f":{cmd} takes no argument")
    if arg is not None and kind == "host" and arg not in names.hosts:
        raise CommandError(f"no host {arg!r} (known: {', '.join(names.hosts) or 'none'})")
    if arg is not None and kind == "ref":
        arg = resolve_ref(arg, names)
    if cmd == "host" and arg is None:
        cmd = "hosts"
    return cmd, arg


def candidates(text: str, names: Names) -> list[str]:
    """Every full command line that completes `text` (commands, then a host or a service), best first."""
    if " " not in text:
        word = text.lower()
        full = [c for c in COMMANDS if c.startswith(word)]
        return [c + (" " if COMMANDS[c][0] else "") for c in full] if word else []
    head, _, arg = text.partition(" ")
    cmd = ALIASES.get(head.lower(), head.lower())
    kind = COMMANDS.get(cmd, ("", ""))[0]
    pool = names.hosts if kind == "host" else names.refs if kind == "ref" else ()
    low = arg.lower()
    first = [p for p in pool if p.lower().startswith(low)]
    bare = [p for p in pool if "/" in p and p.split("/", 1)[1].lower().startswith(low) and p not in first]
    return [f"{head} {p}" for p in [*first, *bare]]


def complete(text: str, names: Names) -> str:
    """What Tab makes of `text`: the only candidate, or the candidates' common prefix (never shorter)."""
    found = candidates(text, names)
    if not found:
        return text
    if len(found) == 1:
        return found[0]
    prefix = found[0]
    for c in found[1:]:
        while not c.startswith(prefix):
            prefix = prefix[:-1]
    return prefix if len(prefix) > len(text) else text


class CommandSuggester(Suggester):
    """The inline suggestion: the first candidate when it extends what was typed."""

    def __init__(self, names: Callable[[], Names]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.names = names

    async def get_suggestion(self, value: str) -> str | None:
        found = [c for c in candidates(value, self.names()) if c.startswith(value)]
        return found[0] if found and found[0] != value else None


def run_command(app: AppHost, text: str) -> None:
    """Carry out a command line; a bad one is a clear message and changes nothing."""
    try:
        cmd, arg = parse(text, names_of(app))
    except CommandError as e:
        app.notify(str(e), severity="error")
        return
    if cmd == "help":
        app.action_help()
    elif cmd == "sweep":
        open_sweep(app, arg)
    elif cmd == "logs" and arg is not None:
        app.request_service("logs", arg)
    elif cmd == "gpus":
        app.select_host(arg)
        app.action_focus_pane(2)
    elif cmd == "host" and arg is not None:
        app.action_focus_pane(1)
        app.call_after_refresh(_cursor_to_host, app, arg)
    else:
        app.action_focus_pane(PANE_OF[cmd])


def _cursor_to_host(app: AppHost, name: str) -> None:
    from ddtree_tui.ui.widgets.hosts import HostsPane

    pane = app.query_one(HostsPane)
    pane.select_key(name)
    app.select_host(name)


class CommandScreen(ModalScreen[str | None]):
    """The `:` prompt at the bottom: Enter runs, Esc cancels, Tab completes, Up/Down walk the history."""

    DEFAULT_CSS = """
    CommandScreen { align: center bottom; }
    CommandScreen > #command-box { width: 100%; height: auto; border: round $accent; background: $surface; }
    CommandScreen #command-hint { color: $text-muted; height: auto; padding: 0 1; }
    CommandScreen Input { border: none; height: 1; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("tab", "complete", "Complete", priority=True),
        Binding("up", "history(-1)", "Previous command"),
        Binding("down", "history(1)", "Next command"),
    ]

    def __init__(self, app: AppHost, history: list[str]) -> None:
        super().__init__()
        self.host = app
        self.history = history  # the app's list: a run command is appended to it
        self.at = len(history)

    def names(self) -> Names:
        return names_of(self.host)

    def compose(self) -> ComposeResult:
        with Vertical(id="command-box"):
            yield Input(placeholder=":", id="command-input", suggester=CommandSuggester(self.names))
            yield Label(hint(), id="command-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip().removeprefix(":").strip()
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
            del self.history[:-100]
        self.dismiss(text or None)

    def action_complete(self) -> None:
        inp = self.query_one(Input)
        inp.value = complete(inp.value, self.names())
        inp.cursor_position = len(inp.value)

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        self.at = max(0, min(len(self.history), self.at + step))
        inp = self.query_one(Input)
        inp.value = self.history[self.at] if self.at < len(self.history) else ""
        inp.cursor_position = len(inp.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def hint(commands: Sequence[str] = tuple(COMMANDS)) -> str:
    arg = {"host": " NAME", "ref": " SVC", "": ""}
    return "  ".join(f":{c}{arg[COMMANDS[c][0]] if c != 'gpus' else ' [HOST]'}" for c in commands) + (
        "   · Tab completes · ↑↓ history · Esc cancels"
    )

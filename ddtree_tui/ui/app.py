"""The Textual app: panes render fleet snapshots; keys, buttons and the palette post intents that run in
workers. One consumer task reads the fleet's event queue and marks panes dirty; a timer repaints at most
`refresh_hz` times a second and only the panes that are visible, so a burst of events never freezes keys."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.theme import Theme
from textual.widgets import Input, Static, Tab, Tabs

from ddtree_tui.bench.models import BenchParams
from ddtree_tui.events import (
    BenchEventWrap,
    GpuSampleEvent,
    HostStateChanged,
    LogLine,
    Notice,
    ServiceStateChanged,
    TodoChanged,
)
from ddtree_tui.state import FleetSnapshot
from ddtree_tui.ui.backend import FleetLike, StaticFleet
from ddtree_tui.ui.commands import FleetCommands
from ddtree_tui.ui.details import gpu_detail, host_detail, service_detail
from ddtree_tui.ui.messages import (
    BenchIntent,
    DrillDown,
    HostSelected,
    ServiceIntent,
    ServiceSelected,
    TodoIntent,
)
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.detail import DetailScreen
from ddtree_tui.ui.screens.doctor import DoctorScreen
from ddtree_tui.ui.screens.help import NAVIGATION, HelpScreen
from ddtree_tui.ui.screens.messages import MessageRecord, MessagesScreen
from ddtree_tui.ui.screens.move import MoveScreen
from ddtree_tui.ui.screens.todo_edit import TodoEditScreen
from ddtree_tui.ui.summary import topbar
from ddtree_tui.ui.widgets.base import Pane, View
from ddtree_tui.ui.widgets.bench import BenchPane
from ddtree_tui.ui.widgets.footer import LeanFooter
from ddtree_tui.ui.widgets.gpus import GpusPane
from ddtree_tui.ui.widgets.hosts import HostsPane
from ddtree_tui.ui.widgets.logs import LogsPane
from ddtree_tui.ui.widgets.services import ServicesPane
from ddtree_tui.ui.widgets.todos import TodosPane

HIGH_CONTRAST = Theme(
    name="ddtree-high-contrast",
    primary="#ffff00",
    secondary="#00ffff",
    accent="#ffff00",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#1c1c1c",
    success="#00ff00",
    warning="#ffff00",
    error="#ff0000",
    dark=True,
)

PANE_TAB = {1: "tab-fleet", 2: "tab-fleet", 3: "tab-fleet", 4: "tab-todos", 5: "tab-bench", 6: "tab-logs"}
PANE_CLASSES: dict[int, type[Pane]] = {
    1: HostsPane,
    2: GpusPane,
    3: ServicesPane,
    4: TodosPane,
    5: BenchPane,
    6: LogsPane,
}
LOG_BUF_MAX = 500
# actions that only make sense on the main screen (not while a dialog is open)
MAIN_ONLY = {
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
}


def themes_dir() -> Path:
    """themes/ next to the package in a checkout, or inside the package when installed."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent.parent / "themes", here / "themes"):
        if cand.is_dir() and any(cand.glob("*.tcss")):
            return cand
    return here.parent.parent / "themes"


def discover_themes(directory: Path | None = None) -> dict[str, tuple[Path, str]]:
    """name -> (tcss file, the Textual base theme named by its `textual-theme:` header line)."""
    out: dict[str, tuple[Path, str]] = {}
    for p in sorted((directory or themes_dir()).glob("*.tcss")):
        head = p.read_text(encoding="utf-8")[:600]
        m = re.search(r"textual-theme:\s*([A-Za-z0-9_-]+)", head)
        out[p.stem] = (p, m.group(1) if m else "textual-dark")
    return out


class DDTreeApp(App[int]):
    """ddtree-tui. `fleet` is the core (or a StaticFleet for frozen rendering); `live=False` starts nothing."""

    TITLE = "ddtree-tui"
    COMMANDS = App.COMMANDS | {FleetCommands}
    ENABLE_COMMAND_PALETTE = True
    CSS = """
    #topbar { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    #tabs { height: 2; }
    #main { height: 1fr; }
    #row-top { height: auto; }
    #row-bottom { height: 1fr; }
    .-narrow #row-top > Pane { width: 1fr; }
    .-narrow #row-bottom > Pane { width: 1fr; }
    .-narrow #main > GpusPane, .-narrow #main > ServicesPane { height: 1fr; }
    .-wide #tabs { display: none; }
    .-wide #row-top { max-height: 12; }
    .-wide HostsPane { width: 3fr; }
    .-wide TodosPane { width: 2fr; height: auto; max-height: 12; }
    .-wide #main > GpusPane { height: auto; max-height: 40%; }
    .-wide #main > ServicesPane { height: auto; max-height: 35%; }
    .-wide #row-bottom { min-height: 10; }
    .-wide BenchPane { width: 1fr; }
    .-wide LogsPane { width: 1fr; }
    #message-bar { height: 1; padding: 0 1; color: $text-muted; }
    .-narrow ServicesPane DataTable { height: 1fr; }
    #message-bar.-error { color: $error; text-style: bold; }
    #message-bar.-warning { color: $warning; }
    ToastRack { display: none; }
    #filter { dock: bottom; display: none; height: 3; }
    #filter.-shown { display: block; }
    """
    # at least this many columns and rows: every pane on one screen; below it, tabs
    WIDE_MIN = (140, 40)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "focus_pane(1)", "Hosts", show=False, tooltip="focus the hosts pane"),
        Binding("2", "focus_pane(2)", "GPUs", show=False, tooltip="focus the GPU pane"),
        Binding("3", "focus_pane(3)", "Services", show=False, tooltip="focus the services pane"),
        Binding("4", "focus_pane(4)", "Todos", show=False, tooltip="focus the todo checklist"),
        Binding("5", "focus_pane(5)", "Bench", show=False, tooltip="focus the benchmark pane"),
        Binding("6", "focus_pane(6)", "Logs", show=False, tooltip="focus the log pane"),
        Binding("l", "service('launch')", "Launch", tooltip="launch the selected service"),
        Binding(
            "k", "service('kill')", "Kill", tooltip="kill the selected service (asks; Cancel is the default)"
        ),
        Binding("r", "service('restart')", "Restart", tooltip="redeploy the selected service (asks)"),
        Binding("m", "service('move')", "Move", tooltip="move the selected service to another host (asks)"),
        Binding("b", "bench", "Bench", tooltip="benchmark: pick services and a prompt set, run"),
        Binding("L", "logs", "Logs", tooltip="show and follow the selected service's log"),
        Binding(
            "D",
            "doctor",
            "Doctor",
            show=False,
            tooltip="doctor: preflight checks of the selected host",
        ),
        Binding("t", "new_todo", "New todo", tooltip="add an item to the todo checklist"),
        Binding("slash", "filter", "Filter", show=False, tooltip="filter the focused pane / search the log"),
        Binding("T", "cycle_theme", "Theme", show=False, tooltip="next colour theme"),
        Binding("R", "reload_profiles", "Reload", show=False, tooltip="re-read the host profiles from disk"),
        Binding("question_mark", "help", "Help", tooltip="this list of keys"),
        Binding("H", "messages", "Messages", show=False, tooltip="every message of this session (history)"),
        Binding(
            "ctrl+p",
            "command_palette",
            "Commands",
            show=False,
            tooltip="every action for every host and service",
        ),
        Binding("q", "quit", "Quit", tooltip="stop what this session started (demo) and leave"),
        Binding("escape", "clear_filter", "Clear filter", show=False, tooltip="clear the filter"),
    ]

    def __init__(
        self,
        fleet: FleetLike,
        *,
        theme_name: str = "dark",
        demo: bool = False,
        live: bool = True,
        refresh_hz: float = 5.0,
        stop_timeout: float = 15.0,
        crash_dir: Path | None = None,
    ) -> None:
        self._themes = discover_themes()
        super().__init__(css_path=[p for p, _ in self._themes.values()])
        self.register_theme(HIGH_CONTRAST)
        if theme_name not in self._themes:
            raise ValueError(f"unknown theme {theme_name!r} (known: {', '.join(self._themes)})")
        self.fleet = fleet
        self.demo = demo
        self.live = live and not isinstance(fleet, StaticFleet)
        self.refresh_hz = refresh_hz
        self.stop_timeout = stop_timeout
        self.theme_name = theme_name
        self.selected_service: str | None = None
        self.bind("w", "sweep", description="Sweep", show=False)  # the tuning lab (ui/sweep_screen.py)
        self.selected_host: str | None = None
        self.filter_text = ""
        self.filter_pane = 0
        self.active_tab = "tab-fleet"
        self._snap: FleetSnapshot = fleet.snapshot()
        self._dirty: set[str] = {"fleet", "todos", "bench", "logs"}
        self._stale: set[int] = set()
        self._log_buf: list[str] = []
        self._log_overflow = False
        self._bench_history: list[Any] = []
        self._history_sig: Any = ("unset",)
        self._last_clock_paint = 0.0
        self._busy: set[str] = set()
        self._todo_lock = asyncio.Lock()
        self._fleet_started = False
        self._fleet_stopped = False
        self.paint_count = 0  # repaints done; benchmarks/ui.py reads it
        self.messages: list[MessageRecord] = []  # every notice, for `H`; the bar shows the latest
        self._message_until = 0.0
        self.crash_dir = crash_dir or Path(".ddtree")
        self.crash_file: Path | None = None  # where the traceback of an unhandled error went
        self.crash_summary: str | None = None
        self.mode_short: str | None = None
        if demo:  # the labels stay on screen at any width: the services are SIMULATED, the GPU a REPLAY
            self.mode_short = "DEMO · SIM · REPLAY"
            self.sub_title = "DEMO: SIMULATED services, GPU telemetry a REPLAY of a real H200 recording"
        elif not self.live:
            self.sub_title = "snapshot"

    # --- layout ------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="topbar")
        yield Tabs(
            Tab("Fleet 1-3", id="tab-fleet"),
            Tab("Todos 4", id="tab-todos"),
            Tab("Bench 5", id="tab-bench"),
            Tab("Logs 6", id="tab-logs"),
            id="tabs",
        )
        with Vertical(id="main"):
            with Horizontal(id="row-top"):
                yield HostsPane(id="pane-1")
                yield TodosPane(id="pane-4")
            yield GpusPane(id="pane-2")
            yield ServicesPane(id="pane-3")
            with Horizontal(id="row-bottom"):
                yield BenchPane(id="pane-5")
                yield LogsPane(id="pane-6")
        yield Static("", id="message-bar")
        yield Input(placeholder="filter", id="filter")
        yield LeanFooter()  # Footer minus the leak of its old keys

    # --- responsive layout: one screen when it fits, tabs when it does not -------------------------------
    def is_wide(self) -> bool:
        w, h = self.size.width or 80, self.size.height or 24
        return w >= self.WIDE_MIN[0] and h >= self.WIDE_MIN[1]

    # share of the width of the panes that sit side by side in the one-screen layout (CSS below agrees)
    WIDE_SHARE: ClassVar[dict[int, float]] = {1: 3 / 5, 4: 2 / 5, 5: 1 / 2, 6: 1 / 2}

    def pane_width(self, n: int) -> int:
        """A pane's width under the current layout, from the terminal size alone (deterministic)."""
        w = self.size.width or 80
        return int(w * self.WIDE_SHARE.get(n, 1.0)) if self.is_wide() else w

    def _layout(self) -> None:
        """Show every pane (wide) or the active tab's panes (narrow); hidden panes are not painted."""
        wide = self.is_wide()
        self.set_class(wide, "-wide")
        self.set_class(not wide, "-narrow")
        shown = set(PANE_TAB) if wide else {n for n, t in PANE_TAB.items() if t == self.active_tab}
        for n in PANE_TAB:
            self.pane(n).display = n in shown
        self.query_one("#row-top").display = bool(shown & {1, 4})
        self.query_one("#row-bottom").display = bool(shown & {5, 6})
        self.query_one(LeanFooter).compact = (self.size.width or 80) < 120

    async def _on_resize(self, event: events.Resize) -> None:
        await super()._on_resize(event)
        self.call_after_refresh(self._relayout)

    def _relayout(self) -> None:
        if not self._composed_ok():
            return
        self._layout()
        self.call_after_refresh(self.flush, True)  # column sets follow the new pane widths

    def _composed_ok(self) -> bool:
        try:
            self.query_one("#main")
        except Exception:
            return False
        return True

    def pane(self, n: int) -> Pane:
        return self.query_one(f"#pane-{n}", Pane)

    def pane_titles(self) -> dict[int, str]:
        return {n: cls.pane_title for n, cls in PANE_CLASSES.items()}

    def on_mount(self) -> None:
        self._apply_theme(self.theme_name)
        self._layout()
        inp = self.query_one("#filter", Input)
        inp.cursor_blink = False
        self._snap = self.fleet.snapshot()
        self._pick_default_service()
        self.flush(force=True)
        self.pane(3).focus_main()
        if self.live:
            self.run_worker(self._load_bench_history(), group="history", exclusive=True)
            self.run_worker(self._run_fleet(), group="fleet", exclusive=True, name="fleet")
            self.set_interval(1.0 / self.refresh_hz, self.flush, name="repaint")
            self.set_interval(2.0, self._poll_history, name="history-watch")

    # --- the fleet ---------------------------------------------------------------------------------------
    async def _run_fleet(self) -> None:
        q = self.fleet.subscribe()
        try:
            self._fleet_started = True
            await self.fleet.start()
            while True:
                ev = await q.get()
                self._on_fleet_event(ev)
                while not q.empty():
                    self._on_fleet_event(q.get_nowait())
        finally:
            self.fleet.unsubscribe(q)

    def _on_fleet_event(self, ev: Any) -> None:
        if isinstance(ev, HostStateChanged | GpuSampleEvent | ServiceStateChanged):
            self._dirty.add("fleet")
        elif isinstance(ev, LogLine):
            if f"{ev.host}/{ev.service}" == self.selected_service:
                self._log_buf.append(ev.line)
                if len(self._log_buf) > LOG_BUF_MAX:  # hidden for long: reload from the fleet's tail at paint
                    del self._log_buf[: len(self._log_buf) - LOG_BUF_MAX]
                    self._log_overflow = True
                self._dirty.add("logs")
        elif isinstance(ev, BenchEventWrap):
            self.query_one(BenchPane).live.apply(ev.event)
            self._dirty.add("bench")
        elif isinstance(ev, TodoChanged):
            self._dirty.add("todos")
        elif isinstance(ev, Notice):
            self.notify(ev.text, severity=ev.severity, timeout=6 if ev.severity != "error" else 10)

    async def _load_bench_history(self) -> None:
        try:
            self._bench_history = await asyncio.to_thread(self.fleet.bench_history)
        except Exception as e:  # reported, never fatal
            self.notify(f"bench history: {e}", severity="warning")
        self._dirty.add("bench")

    def _poll_history(self) -> None:
        self.run_worker(self._check_history(), group="history-watch", exclusive=True)

    async def _check_history(self) -> None:
        """A run made headless (`--run-bench`, another terminal) while the TUI is open: its line lands in
        the history file; reload when the file's size or mtime moved (a stat off the UI path)."""
        path = getattr(self.fleet, "history_path", None)
        if path is None:
            return
        try:
            st = await asyncio.to_thread(Path(path).stat)
            sig: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
        except OSError:
            sig = None
        if sig != self._history_sig:  # (the first check reads it once more: cheap, and no race at start)
            self._history_sig = sig
            await self._load_bench_history()

    def current_snapshot(self) -> FleetSnapshot:
        return self._snap

    def now(self) -> float:
        """The clock panes use: frozen at the snapshot's time when nothing is live (stable screenshots)."""
        clock = getattr(self.fleet, "clock", None)  # a replay shows ages against its recorded time
        if callable(clock):
            return float(clock())
        return time.time() if self.live else self._snap.ts

    def _view(self) -> View:
        return View(
            snap=self._snap,
            now=self.now(),
            fleet=self.fleet,
            selected_host=self.selected_host,
            selected_service=self.selected_service,
            filter=self.filter_text,
            extra={"filter_pane": self.filter_pane, "bench_history": self._bench_history},
        )

    def _visible(self) -> set[int]:
        if self.is_wide():
            return set(PANE_TAB)
        return {n for n, t in PANE_TAB.items() if t == self.active_tab}

    def flush(self, force: bool = False) -> None:
        """Repaint the visible panes whose data changed; once a second the clocks (uptime, retry in Ns)."""
        now = time.monotonic()
        if now - self._last_clock_paint >= 1.0:
            self._last_clock_paint = now
            self._dirty.add("fleet")
        if force:
            self._dirty |= {"fleet", "todos", "bench", "logs"}
        if not self._dirty and not self._stale:
            return
        visible = self._visible()
        want: set[int] = set()
        if "fleet" in self._dirty:
            self._snap = self.fleet.snapshot()
            self._pick_default_service()
            banner = getattr(self.fleet, "banner", None)  # an attached fleet says where its data comes from
            if callable(banner):
                self.sub_title = banner()
            want |= {1, 2, 3}
        if "todos" in self._dirty:
            want.add(4)
        if "bench" in self._dirty:
            want.add(5)
        if "logs" in self._dirty:
            want.add(6)
        self._dirty.clear()
        want |= self._stale
        view = self._view()
        with self.batch_update():
            for n in sorted(want):
                if n not in visible and not force:
                    self._stale.add(n)  # painted when its tab shows (hidden panes cost nothing)
                    continue
                self._stale.discard(n)
                self._paint(n, view)
        self._paint_topbar()
        self._paint_message_bar()
        self.paint_count += 1

    def _paint_topbar(self) -> None:
        try:
            bar = self.query_one("#topbar", Static)
        except NoMatches:  # not composed yet, or torn down while the app exits (a last refresh tick)
            return
        width = max(20, (self.size.width or 80) - 2)
        bar.update(topbar(self._snap, self.now(), self.sub_title, width, self.mode_short))

    def _paint(self, n: int, view: View) -> None:
        pane = self.pane(n)
        if n == 6 and isinstance(pane, LogsPane):
            overflow, self._log_overflow = self._log_overflow, False
            if (
                not overflow
                and pane.ref == view.selected_service
                and pane._search == pane.active_filter(view)
            ):
                buf, self._log_buf = self._log_buf, []
                pane.append(buf)
                pane._title()
                return
            self._log_buf = []
            pane.ref = None  # force a full reload from fleet.log_lines()
        try:
            pane.render_view(view)
        except Exception as e:  # a bad sample must not take the app down
            self.log.error(f"pane {n} failed to render: {e!r}")

    def repaint_pane(self, n: int) -> None:
        """Paint one pane now (a new sort order); hidden panes wait for their tab."""
        self._stale.add(n)
        self.flush()

    def _pick_default_service(self) -> None:
        refs = [f"{h.name}/{s.name}" for h in self._snap.hosts for s in h.services]
        if self.selected_service not in refs:
            self.selected_service = refs[0] if refs else None
            self._dirty.add("logs")

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        tab = event.tab.id if event.tab is not None else None
        if tab is None or tab == self.active_tab:
            return
        self.active_tab = tab
        self._layout()
        self._stale |= {n for n, t in PANE_TAB.items() if t == tab}
        self.flush()

    # --- selection messages ------------------------------------------------------------------------------
    def on_service_selected(self, msg: ServiceSelected) -> None:
        if msg.ref != self.selected_service:
            self.selected_service = msg.ref
            self._log_buf = []
            self._dirty.add("logs")

    def on_drill_down(self, msg: DrillDown) -> None:
        """Enter on a host, GPU or service row: its detail screen (Esc back)."""
        view = self.detail_view(msg.kind, msg.key)
        if view is None:
            self.notify(f"{msg.kind} {msg.key}: nothing to show", severity="warning")
            return
        self.push_screen(DetailScreen(view))

    def detail_view(self, kind: str, key: str) -> Any:
        snap, now = self.fleet.snapshot(), self.now()
        if kind == "service":
            return service_detail(snap, key, self.fleet.log_lines(key), now)
        if kind == "gpu":
            host, _, idx = key.partition(":")
            index = idx.split(":")[0]
            hist = self.fleet.gpu_history(host, int(index), "util_gpu") if index.isdigit() else []
            return gpu_detail(snap, key, hist)
        return host_detail(snap, key, now)

    def on_host_selected(self, msg: HostSelected) -> None:
        self.select_host(msg.host)

    def select_host(self, host: str | None) -> None:
        if host != self.selected_host:
            self.selected_host = host
            self._dirty.add("fleet")
            self.flush()

    # --- keys --------------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in MAIN_ONLY and isinstance(self.screen, ModalScreen):
            return False
        return True

    def action_focus_pane(self, n: int) -> None:
        if PANE_TAB[n] != self.active_tab:
            self.active_tab = PANE_TAB[n]
            self.query_one(Tabs).active = PANE_TAB[n]
            self._layout()
            self._stale |= {m for m, t in PANE_TAB.items() if t == self.active_tab}
            self.flush()
        self.call_after_refresh(self._focus_pane_main, n)

    def _focus_pane_main(self, n: int) -> None:
        """Deferred focus after a tab switch; a `/` typed meanwhile keeps the focus in the filter."""
        if self.focused is not None and self.focused.id == "filter":
            return
        self.pane(n).focus_main()

    def action_service(self, verb: str) -> None:
        ref = self.selected_service
        if ref is None:
            self.notify("no service selected", severity="warning")
            return
        self.request_service(verb, ref)

    def on_service_intent(self, msg: ServiceIntent) -> None:
        self.request_service(msg.verb, msg.ref, msg.to_host)

    def request_service(self, verb: str, ref: str, to_host: str | None = None) -> None:
        """Every way to act on a service ends here: keys, palette, messages."""
        if verb == "launch":
            self._start_intent("launch", ref)
        elif verb in ("kill", "restart"):
            label = "Kill" if verb == "kill" else "Restart"
            detail = (
                "The process is stopped (SIGTERM, then SIGKILL after the kill timeout)."
                if verb == "kill"
                else "Kill, then launch again with the same spec (redeploy)."
            )
            self.push_screen(
                ConfirmScreen(f"{label} {ref}?", detail, label),
                lambda ok: self._start_intent(verb, ref) if ok else self.notify(f"{verb} {ref}: cancelled"),
            )
        elif verb == "move":
            if to_host is None:
                here = ref.split("/", 1)[0]
                others = [(h.name, h.state) for h in self._snap.hosts if h.name != here]
                if not others:
                    self.notify("there is no other host to move to", severity="warning")
                    return
                down = [n for n, st in others if st != "connected"]
                if len(down) == len(others):  # refused now, not after a confirm
                    self.notify(
                        f"no connected host to move to ({', '.join(down)}: not connected)", severity="warning"
                    )
                    return
                self.push_screen(
                    MoveScreen(ref, others), lambda dest: dest and self.request_service("move", ref, dest)
                )
                return
            self.push_screen(
                ConfirmScreen(
                    f"Move {ref} to {to_host}?",
                    f"Launch the same spec on {to_host}, wait until it is ready, then kill it here.",
                    "Move",
                ),
                lambda ok: self._start_intent("move", ref, to_host) if ok else self.notify("move: cancelled"),
            )
        elif verb == "logs":
            self.selected_service = ref
            self.query_one(ServicesPane).select_ref(ref)
            self._dirty.add("logs")
            self.action_focus_pane(6)
        elif verb == "bench":
            self._open_bench([ref])
        elif verb == "smoke":
            self.notify(f"smoke {ref} …", timeout=3)
            self.run_worker(self._do_smoke(ref), group=f"smoke:{ref}", exclusive=True, name=f"smoke {ref}")

    async def _do_smoke(self, ref: str) -> Any:
        """Read-only, so it does not mark the service busy; a live fleet reports it as a Notice event."""
        try:
            res = await self.fleet.smoke(ref)
        except Exception as e:
            self.notify(f"smoke {ref} failed: {e}", severity="error", timeout=10)
            return None
        if not self.live:
            ok = bool(getattr(res, "ok", False))
            self.notify(res.line(), severity="information" if ok else "error", timeout=10)
        return res

    def _start_intent(self, verb: str, ref: str, to_host: str | None = None) -> None:
        if ref in self._busy:
            self.notify(f"{ref} is busy with another action", severity="warning")
            return
        self._busy.add(ref)
        self.notify(f"{verb} {ref}" + (f" → {to_host}" if to_host else "") + " …", timeout=3)
        self.run_worker(self._do_intent(verb, ref, to_host), group=f"svc:{ref}", name=f"{verb} {ref}")

    async def _do_intent(self, verb: str, ref: str, to_host: str | None) -> Any:
        try:
            if verb == "move":
                res = await self.fleet.move(ref, to_host or "")
            else:
                res = await getattr(self.fleet, verb)(ref)
            if not self.live:  # a live fleet reports results as Notice events
                ok = bool(getattr(res, "ok", False))
                self.notify(str(getattr(res, "message", res)), severity="information" if ok else "error")
            return res
        except Exception as e:
            self.notify(f"{verb} {ref} failed: {e}", severity="error", timeout=10)
            return None
        finally:
            self._busy.discard(ref)
            self._dirty.add("fleet")

    def action_logs(self) -> None:
        if self.selected_service:
            self.request_service("logs", self.selected_service)

    # --- doctor ------------------------------------------------------------------------------------------
    def doctor_host(self) -> str | None:
        """The selected host, else the selected service's host, else the first host."""
        if self.selected_host:
            return self.selected_host
        if self.selected_service:
            return self.selected_service.split("/", 1)[0]
        hosts = [h.name for h in self._snap.hosts] or [p.name for p in self.fleet.profiles()]
        return hosts[0] if hosts else None

    def action_sweep(self) -> None:
        from ddtree_tui.ui.sweep_screen import open_sweep

        open_sweep(self)

    def action_doctor(self) -> None:
        host = self.doctor_host()
        if host is None:
            self.notify("no host to check", severity="warning")
            return
        self.open_doctor(host)

    def open_doctor(self, host: str) -> None:
        """The checks run in the screen's worker, over the fleet's open transport to the host."""
        self.push_screen(DoctorScreen(host, self.fleet.doctor))

    # --- bench -------------------------------------------------------------------------------------------
    def action_bench(self) -> None:
        ready = [f"{h.name}/{s.name}" for h in self._snap.hosts for s in h.services if s.state == "ready"]
        self._open_bench(ready or ([self.selected_service] if self.selected_service else []))

    def _open_bench(self, preselect: list[str]) -> None:
        refs = [(f"{h.name}/{s.name}", s.state) for h in self._snap.hosts for s in h.services]
        if not refs:
            self.notify("no services to benchmark", severity="warning")
            return

        def done(res: dict[str, Any] | None) -> None:
            if res and "shape" in res:  # a load shape, soak or agentic sessions: the pane runs and shows it
                self.action_focus_pane(5)
                self.query_one(BenchPane).start_shape(res["refs"], res["shape"])
            elif res:
                self.post_message(BenchIntent(res["params"]))

        self.push_screen(BenchSetupScreen(refs, preselect), done)

    def on_bench_intent(self, msg: BenchIntent) -> None:
        self.start_bench(msg.params)

    def start_bench(self, params: BenchParams) -> None:
        pane = self.query_one(BenchPane)
        pane.live.reset(0, f"starting: {params.prompt_set} on {', '.join(params.refs)}")
        self._dirty.add("bench")
        self.action_focus_pane(5)
        self.run_worker(self._do_bench(params), group="bench", exclusive=True, name="bench")

    async def _do_bench(self, params: BenchParams) -> Any:
        pane = self.query_one(BenchPane)
        try:
            run = await self.fleet.run_bench(**params.model_dump())
        except Exception as e:
            pane.live.running = False
            pane.live.status = f"failed: {e}"
            self.notify(f"bench failed: {e}", severity="error", timeout=10)
            self._dirty.add("bench")
            return None
        if getattr(run, "ok", None) is False and not hasattr(run, "summaries"):
            pane.live.status = str(getattr(run, "message", "bench did not run"))
        else:
            pane.live.run = run
            pane.live.status = f"finished: {params.prompt_set} · {len(params.refs)} services"
        pane.live.running = False
        await self._load_bench_history()
        self._dirty.add("bench")
        return run

    # --- todos -------------------------------------------------------------------------------------------
    def action_new_todo(self) -> None:
        self.push_screen(TodoEditScreen("New todo"), lambda r: r and self._todo_apply("add", None, r))

    def on_todo_intent(self, msg: TodoIntent) -> None:
        store = self.fleet.todos
        i = msg.index
        if msg.verb == "add":
            self.action_new_todo()
        elif msg.verb == "edit" and i is not None:
            it = store.items[i]
            self.push_screen(
                TodoEditScreen(f"Edit todo {i + 1}", it.content, it.priority, it.check),
                lambda r: r and self._todo_apply("edit", i, r),
            )
        elif msg.verb == "delete" and i is not None:
            self.push_screen(
                ConfirmScreen(f"Delete todo {i + 1}?", store.items[i].content, "Delete"),
                lambda ok: ok and self._todo_apply("delete", i, {}),
            )
        else:
            self._todo_apply(msg.verb, i, {})

    def _todo_apply(self, verb: str, i: int | None, data: dict[str, Any]) -> None:
        """Change the list in memory (instant), then save off the UI path."""
        store = self.fleet.todos
        if not hasattr(store, "save"):
            self.notify("todos: the view is frozen (snapshot mode)", severity="warning")
            return
        cursor: int | None = i
        try:
            if verb == "add":
                store.add(data["content"], data.get("priority", "medium"), data.get("check") or None)
                cursor = len(store.items) - 1
            elif verb == "edit" and i is not None:
                store.edit(
                    i, content=data["content"], priority=data.get("priority"), check=data.get("check", "")
                )
            elif verb == "start" and i is not None:
                store.set_status(i, "in_progress")
            elif verb == "complete" and i is not None:
                store.set_status(i, "completed")
            elif verb == "toggle" and i is not None:
                store.set_status(i, "pending" if store.items[i].status == "completed" else "completed")
            elif verb == "delete" and i is not None:
                store.delete(i)
                cursor = max(0, i - 1)
            elif verb in ("up", "down") and i is not None:
                store.move(i, -1 if verb == "up" else 1)
                cursor = max(0, min(len(store.items) - 1, i + (-1 if verb == "up" else 1)))
        except Exception as e:
            self.notify(f"todo: {e}", severity="error")
            return
        self._dirty.add("todos")
        self.flush()
        if cursor is not None:
            self.query_one(TodosPane).cursor_to(cursor)
        self.run_worker(self._todo_save(), group="todo-save")

    async def _todo_save(self) -> None:
        async with self._todo_lock:
            try:
                await asyncio.to_thread(self.fleet.todos.save)
                refresh = getattr(self.fleet, "refresh_todos", None)
                if refresh is not None:
                    refresh()
            except Exception as e:
                self.notify(f"todo not saved: {e}", severity="error", timeout=10)
        self._dirty.add("todos")

    # --- filter ------------------------------------------------------------------------------------------
    def action_filter(self) -> None:
        focused_pane = next(
            (a for a in (self.focused.ancestors if self.focused else []) if isinstance(a, Pane)), None
        )
        tab = self.active_tab
        if focused_pane is not None and focused_pane.display and focused_pane.pane_number in self._visible():
            n = focused_pane.pane_number  # (a key right after `6` may come before the focus moved)
        else:
            n = {"tab-todos": 4, "tab-bench": 5, "tab-logs": 6}.get(tab, 3)
        self.filter_pane = n
        inp = self.query_one("#filter", Input)
        inp.placeholder = (
            f"{'search' if n == 6 else 'filter'} {PANE_CLASSES[n].pane_title} (Enter keeps, Esc clears)"
        )
        inp.value = self.filter_text
        inp.add_class("-shown")
        inp.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value
            self._dirty |= {"fleet", "todos", "logs"}
            self.flush()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.input.remove_class("-shown")
            self.pane(self.filter_pane).focus_main()

    def action_clear_filter(self) -> None:
        inp = self.query_one("#filter", Input)
        if not self.filter_text and not inp.has_class("-shown"):
            return
        self.filter_text = ""
        inp.value = ""
        inp.remove_class("-shown")
        self._dirty |= {"fleet", "todos", "logs"}
        self.flush()
        if self.filter_pane:
            self.pane(self.filter_pane).focus_main()

    # --- themes and help ---------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's own commands minus its "Theme" picker: it set a Textual theme while our skins (themes/,
        `T`, `theme NAME` in this palette) stayed, so it only half-applied. One theme system."""
        for cmd in super().get_system_commands(screen):
            if cmd.title not in ("Theme", "Keys"):
                yield cmd
        yield SystemCommand("Keys", "every key binding (?)", self.action_help)

    def theme_names(self) -> list[str]:
        return list(self._themes)

    def _apply_theme(self, name: str) -> None:
        for old in self._themes:
            self.remove_class(f"-skin-{old}")
        self.add_class(f"-skin-{name}")
        base = self._themes[name][1]
        with contextlib.suppress(Exception):
            self.theme = base
        self.theme_name = name

    def set_theme_name(self, name: str) -> None:
        if name not in self._themes:
            self.notify(f"unknown theme {name!r}", severity="error")
            return
        self._apply_theme(name)
        self.call_after_refresh(self.flush, True)  # badge colours are read at paint time
        self.notify(f"theme: {name}", timeout=2)

    def action_reload_profiles(self) -> None:
        self.notify("reloading host profiles …", timeout=3)
        self.run_worker(self._do_reload(), group="reload", exclusive=True, name="reload profiles")

    async def _do_reload(self) -> None:
        """Edited profiles (a port after a refusal, a new host) without a restart; the fleet reports it."""
        try:
            await self.fleet.reload_profiles()
        except Exception as e:  # a bad profile: the fleet already said which file, line and field
            if not self.live:
                self.notify(f"profiles not reloaded: {e}", severity="error", timeout=10)
        self._dirty.add("fleet")

    def action_cycle_theme(self) -> None:
        names = self.theme_names()
        self.set_theme_name(names[(names.index(self.theme_name) + 1) % len(names)])

    def help_groups(self) -> list[tuple[str, list[Any]]]:
        groups: list[tuple[str, list[Any]]] = [("everywhere on the main screen", list(self.BINDINGS))]
        for n, cls in PANE_CLASSES.items():
            if cls.BINDINGS:
                groups.append((f"in the {cls.pane_title} pane (key {n})", list(cls.BINDINGS)))
        groups.append(("moving around (every table and dialog)", list(NAVIGATION)))
        groups.append(("in the confirm dialog", list(ConfirmScreen.BINDINGS)))
        groups.append(("in the bench dialog (b)", list(BenchSetupScreen.BINDINGS)))
        groups.append(("in the doctor dialog (D)", list(DoctorScreen.BINDINGS)))
        return groups

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_groups()))

    # --- messages: one line above the footer (toasts covered the services table) and a history -------------
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        text = f"{title}: {message}" if title else str(message)
        self.messages.append(MessageRecord(time.time(), str(severity), text))
        del self.messages[:-500]
        hold = timeout if timeout is not None else 6.0
        self._message_until = time.monotonic() + (max(hold, 30.0) if severity == "error" else hold)
        self._paint_message_bar()

    def _paint_message_bar(self) -> None:
        try:
            bar = self.query_one("#message-bar", Static)
        except Exception:  # not composed yet
            return
        last = self.messages[-1] if self.messages else None
        fresh = last is not None and time.monotonic() < self._message_until
        bar.set_class(fresh and last.severity == "error", "-error")
        bar.set_class(fresh and last.severity == "warning", "-warning")
        count = f"  (H: {len(self.messages)} messages)" if self.messages else ""
        bar.update(
            Text(
                last.line() + count if fresh and last else (count.strip(" ()") or "H: message history"),
                no_wrap=True,
                overflow="ellipsis",
            )
        )

    def action_messages(self) -> None:
        self.push_screen(MessagesScreen(self.messages))

    async def action_help_quit(self) -> None:
        """ctrl+c leaves like `q` (Textual's default only says 'press ctrl+q')."""
        await self.action_quit()

    # --- crashes -----------------------------------------------------------------------------------------
    def _handle_exception(self, error: Exception) -> None:
        """An unhandled error in any handler: save the traceback to a file, exit non-zero (Textual sets the
        return code to 1), and leave a one-line pointer instead of a screenful of traceback."""
        if self.crash_file is None:
            self.crash_summary = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            self.crash_file = save_traceback(error, self.crash_dir)
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """Textual's fatal path minus the full-screen traceback (it is in `crash_file`)."""
        self.bell()
        self._close_messages_no_wait()

    def crash_line(self) -> str | None:
        """The one line printed after a crash: what broke and where the traceback is."""
        if self.crash_summary is None:
            return None
        where = f"traceback saved to {self.crash_file}" if self.crash_file else "traceback could not be saved"
        return f"ddtree-tui: crashed ({self.crash_summary}); {where}"

    # --- quitting ----------------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        await self.shutdown_fleet()
        self.exit(0)

    async def shutdown_fleet(self) -> None:
        """Stop watchers and, in the demo, the simulated services we launched; bounded in time."""
        if self._fleet_started and not self._fleet_stopped:
            self._fleet_stopped = True
            self.notify("stopping…", timeout=2)
            try:
                async with asyncio.timeout(self.stop_timeout):
                    await self.fleet.stop()
            except Exception as e:
                print(f"ddtree-tui: stopping the fleet: {e}", file=sys.stderr)


def save_traceback(error: BaseException, directory: Path) -> Path | None:
    """Write the full traceback to DIRECTORY/crash-YYYYmmdd-HHMMSS.txt; None when that fails too."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / time.strftime("crash-%Y%m%d-%H%M%S.txt")
        path.write_text(f"ddtree-tui crash at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n{text}", "utf-8")
        return path.resolve()
    except OSError:
        return None


def exit_code(app: DDTreeApp, rc: int | None) -> int:
    """The process exit status after the app has left: a crash prints its one-line pointer and gives 1."""
    line = app.crash_line()
    if line is not None:
        print(line, file=sys.stderr)
        return int(app.return_code or 1)
    return int(rc or app.return_code or 0)


NO_PROFILES = """ddtree-tui: no host profiles found (looked in ./hostprofiles/ and the user config directory).
  Try it without any host:   ddtree-tui --demo   (this machine, simulated services, replayed GPU)
  Or describe a host:        one TOML file a host in ./hostprofiles/ (or the user config directory's
                             hostprofiles/); see hostprofiles/README.md and hostprofiles/examples/."""


def first_run(interactive: bool, answer: str | None = None) -> str | None:
    """No profiles anywhere: say how to write one and, at a terminal, offer the demo. 'demo' or None."""
    print(NO_PROFILES, file=sys.stderr)
    if not interactive:
        return None
    try:
        reply = answer if answer is not None else input("Start the demo now? [y/N] ")
    except EOFError:
        return None
    return "demo" if reply.strip().lower() in ("y", "yes") else None


def cli_main(ns: argparse.Namespace) -> int:
    """`ddtree-tui [--demo] [--profile ...] [--theme NAME]`: the terminal UI."""
    from ddtree_tui.config import ProfileError, resolve_profiles

    try:
        profiles = resolve_profiles(ns.profile, ns.profiles, bool(ns.demo))
    except ProfileError as e:
        print(f"ddtree-tui: {e}", file=sys.stderr)
        return 2
    if not profiles and not ns.demo:
        choice = first_run(sys.stdin.isatty())
        if choice is None:
            return 2
        ns.demo = True
        profiles = resolve_profiles(None, None, True)
    theme = getattr(ns, "theme", None) or "dark"
    known = discover_themes()
    if theme not in known:
        print(f"ddtree-tui: unknown theme {theme!r} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    from ddtree_tui.fleet import Fleet

    todos = Path(ns.todos) if getattr(ns, "todos", None) else Path(".ddtree/todos.json")
    fleet = Fleet(profiles, todos_path=todos, demo=bool(ns.demo))
    app = DDTreeApp(fleet, theme_name=theme, demo=bool(ns.demo), crash_dir=todos.parent)
    rc = app.run()
    if app._fleet_started and not app._fleet_stopped:  # left without `q` (a crash)
        with contextlib.suppress(Exception):
            asyncio.run(asyncio.wait_for(fleet.stop(), 15))
    return exit_code(app, rc)

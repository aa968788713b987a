"""The Textual app, the view half: layout, keys, dialogs, messages. The controller (ui/controller.py) reads
the fleet's events, marks panes dirty and builds each pane's typed view (ui/views.py); a timer repaints at
most `refresh_hz` times a second and only the panes that are visible, so a burst of events never freezes keys.
Keys, buttons and the palette post intents that the controller carries out in workers. What the user does to
a service, a todo or a bench run is in ui/service_actions.py, todo_actions.py and bench_actions.py; the layout
rules and CSS in ui/layout.py; the `/` filter bar in ui/filter_bar.py, the message line and its history in ui/notices.py, the skins in ui/theming.py,
crash handling in ui/crash.py (mixins of AppHost, so this module stays about the view)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Static, Tab, Tabs

from ddtree_tui.bench.models import BenchRequest
from ddtree_tui.lib import paths
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.ui import navigation
from ddtree_tui.ui.backend import Deferred, FleetLike, FrozenFleet, ReadOnlyFleet
from ddtree_tui.ui.bench_actions import BenchActions
from ddtree_tui.ui.command import CommandScreen, run_command
from ddtree_tui.ui.controller import Controller
from ddtree_tui.ui.crash import CrashReporter, exit_code
from ddtree_tui.ui.details import DetailView
from ddtree_tui.ui.filter_bar import FilterBar
from ddtree_tui.ui.gcpolicy import IdleCollector, break_strip_cycles
from ddtree_tui.ui.keys import MAIN_KEYS, MAIN_ONLY, NAV_KEYS, RUN_KEYS, to_bindings
from ddtree_tui.ui.layout import APP_CSS, PANE_CLASSES, PANE_TAB, WIDE_MIN, WIDE_SHARE, shown_panes
from ddtree_tui.ui.messages import (
    BenchIntent,
    DrillDown,
    HostSelected,
    ServiceIntent,
    ServiceRequest,
    ServiceSelected,
    ShapeIntent,
    TodoIntent,
)
from ddtree_tui.ui.notices import MessageLine
from ddtree_tui.ui.palette import FleetCommands, open_sweep
from ddtree_tui.ui.screens.detail import DetailScreen
from ddtree_tui.ui.screens.doctor import DoctorScreen
from ddtree_tui.ui.screens.help import HelpScreen, help_groups
from ddtree_tui.ui.screens.messages import MessageRecord
from ddtree_tui.ui.service_actions import ServiceActions
from ddtree_tui.ui.skins import HIGH_CONTRAST, discover_themes
from ddtree_tui.ui.summary import topbar
from ddtree_tui.ui.theming import ThemeSwitch
from ddtree_tui.ui.todo_actions import TodoActions
from ddtree_tui.ui.views import GpusView, HistoryRun
from ddtree_tui.ui.widgets.base import Pane, set_static
from ddtree_tui.ui.widgets.bench import BenchPane
from ddtree_tui.ui.widgets.footer import LeanFooter
from ddtree_tui.ui.widgets.gpus import GpusPane
from ddtree_tui.ui.widgets.hosts import HostsPane
from ddtree_tui.ui.widgets.logs import LogsPane
from ddtree_tui.ui.widgets.services import ServicesPane
from ddtree_tui.ui.widgets.todos import TodosPane

INPUT_FIRST_S = 0.25  # how long a repaint tick waits at most for a queued key's frame
break_strip_cycles()  # rendered lines freed by their reference count, not by a collection (ui/gcpolicy.py)


class DDTreeApp(FilterBar, MessageLine, ThemeSwitch, CrashReporter):
    """ddtree-tui, the view: layout, keys, dialogs and messages; `self.ctl` (ui/controller.py) reads the fleet
    and builds what the panes paint. `fleet` is the core (or a frozen one); `live=False` starts nothing."""

    TITLE = "ddtree-tui"
    COMMANDS = App.COMMANDS | {FleetCommands}
    ENABLE_COMMAND_PALETTE = True
    CSS = APP_CSS + navigation.SCROLL_CSS
    WIDE_MIN = WIDE_MIN
    BINDINGS: ClassVar[list[BindingType]] = [
        *to_bindings(MAIN_KEYS),
        *to_bindings(RUN_KEYS),
        *to_bindings(NAV_KEYS, priority=True),
    ]
    bench: BenchActions  # the app's own (AppHost names only what the action modules use of it)

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
        clock: Callable[[], float] = time.time,
        readonly: bool = False,
    ) -> None:
        self._themes = discover_themes()
        super().__init__(css_path=[p for p, _ in self._themes.values()])
        self.register_theme(HIGH_CONTRAST)
        if theme_name not in self._themes:
            raise ValueError(f"unknown theme {theme_name!r} (known: {', '.join(self._themes)})")
        self.demo = demo
        self.ctl = Controller(
            fleet,
            self,
            live=live and not isinstance(fleet, FrozenFleet),
            stop_timeout=stop_timeout,
            clock=clock,
        )
        self.refresh_hz = refresh_hz
        self.theme_name = theme_name
        self.active_tab = "tab-fleet"
        self._last_clock_paint = 0.0
        self.bench = BenchActions(self)
        self.services = ServiceActions(self)
        self.todos = TodoActions(self)
        self.paint_count = 0  # repaints done; benchmarks/ui.py reads it
        self.gc_policy = IdleCollector()  # collections between frames once the app is up (ui/gcpolicy.py)
        self.ticks_deferred = 0  # repaint ticks that waited for a key's frame (tests read it)
        self.messages: list[MessageRecord] = []  # every notice, for `H`; the bar shows the latest
        self.command_history: list[str] = []  # `:` commands of this session (ui/command.py)
        self._message_until = 0.0
        self.crash_dir = crash_dir or paths.CRASH_DIR
        self.crash_file: Path | None = None  # where the traceback of an unhandled error went
        self.crash_summary: str | None = None
        self.mode_short: str | None = None
        self.readonly = readonly  # --readonly: no intents (a replay or a token-less attach are so anyway)
        if demo:  # the labels stay on screen at any width: the services are SIMULATED, the GPU a REPLAY
            self.mode_short = "DEMO · SIM · REPLAY"
            self.sub_title = "DEMO: SIMULATED services, GPU telemetry a REPLAY of a real H200 recording"
        elif not self.live:
            self.sub_title = "snapshot"

    # --- the controller's state, as the app's (tests, the bench and todo actions, the sweep screen read it) --
    @property
    def fleet(self) -> FleetLike:
        """The controller's fleet: the real one once a deferred fleet (cli/tui.py's) has been built."""
        return self.ctl.fleet

    @fleet.setter
    def fleet(self, fleet: FleetLike) -> None:
        self.ctl.fleet = fleet

    @property
    def live(self) -> bool:
        """False for a frozen fleet: nothing is started and intents' results are shown here."""
        return self.ctl.live

    @live.setter
    def live(self, on: bool) -> None:
        self.ctl.live = on

    @property
    def selected_service(self) -> str | None:
        return self.ctl.selected_service

    @property
    def selected_host(self) -> str | None:
        return self.ctl.selected_host

    @property
    def filter_text(self) -> str:
        return self.ctl.filter_text

    @property
    def filter_pane(self) -> int:
        return self.ctl.filter_pane

    @property
    def _snap(self) -> FleetSnapshot:
        return self.ctl.snap

    @property
    def _dirty(self) -> set[str]:
        return self.ctl.dirty

    @property
    def _bench_history(self) -> list[HistoryRun]:
        return self.ctl.bench_history

    @_bench_history.setter
    def _bench_history(self, runs: list[HistoryRun]) -> None:
        self.ctl.bench_history = runs

    # --- what the controller calls back --------------------------------------------------------------------
    def bench_event(self, event: object) -> None:
        self.query_one(BenchPane).live.apply(event)

    def spawn(
        self, work: Coroutine[object, object, object], group: str, name: str = "", exclusive: bool = False
    ) -> None:
        self.run_worker(work, group=group, name=name, exclusive=exclusive)

    # --- layout ------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # the skin's and the layout's classes before any pane mounts: set in on_mount, each change restyled
        # every widget already there (three whole-screen restyles before the first frame, issue 28)
        self.add_class(f"-skin-{self.theme_name}", update=False)
        wide = self.is_wide()
        self.set_class(wide, "-wide", update=False)
        self.set_class(not wide, "-narrow", update=False)
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
        # the `/` filter's Input (hidden until `/`) is mounted after the first frame (ui/filter_bar.py)
        yield LeanFooter()  # Footer minus the leak of its old keys

    # --- responsive layout: one screen when it fits, tabs when it does not -------------------------------
    def is_wide(self) -> bool:
        w, h = self.size.width or 80, self.size.height or 24
        return w >= self.WIDE_MIN[0] and h >= self.WIDE_MIN[1]

    WIDE_SHARE: ClassVar[dict[int, float]] = WIDE_SHARE

    def pane_width(self, n: int) -> int:
        """A pane's width under the current layout, from the terminal size alone (deterministic)."""
        w = self.size.width or 80
        return int(w * self.WIDE_SHARE.get(n, 1.0)) if self.is_wide() else w

    def _layout(self) -> None:
        """Show every pane (wide) or the active tab's panes (narrow); hidden panes are not painted."""
        wide = self.is_wide()
        self.set_class(wide, "-wide")
        self.set_class(not wide, "-narrow")
        shown = shown_panes(wide, self.active_tab)
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
        if self.read_only_reason() and not self.demo and self.mode_short is None:  # K2: said on screen
            self.mode_short = "READ-ONLY"
        self._apply_theme(self.theme_name)
        self._layout()
        self.call_after_refresh(self.mount_filter_later)  # not in the first frame: mounted once it is out
        self.ctl.refresh_snapshot()
        self.flush(force=True)
        self.pane(3).focus_main()
        if self.live:
            self.set_timer(
                FREEZE_AFTER_S, self._settle_heap, name="freeze-heap"
            )  # well after the first frame
            if isinstance(self.fleet, Deferred):  # cli/tui.py's: the history read and the core's import come
                self.call_after_refresh(self._start_workers)  # once the first frame is on screen (issue 28)
            else:
                self._start_workers()
            self.set_interval(1.0 / self.refresh_hz, self._repaint_tick, name="repaint")
            self.set_interval(2.0, self._poll_history, name="history-watch")

    # --- the fleet (through the controller) ------------------------------------------------------------
    def _start_workers(self) -> None:
        self.run_worker(self.ctl.load_bench_history(), group="history", exclusive=True)
        self.run_worker(self.ctl.run_fleet(), group="fleet", exclusive=True, name="fleet")

    def _poll_history(self) -> None:
        self.run_worker(self.ctl.check_history(), group="history-watch", exclusive=True)

    def current_snapshot(self) -> FleetSnapshot:
        return self.ctl.snap

    def now(self) -> float:
        return self.ctl.now()

    def _visible(self) -> set[int]:
        return shown_panes(self.is_wide(), self.active_tab)

    def flush(self, force: bool = False) -> None:
        """Repaint the visible panes whose data changed; once a second the clocks (uptime, retry in Ns)."""
        want = self._repaint_plan(force)
        if want is None:
            return
        with self.batch_update():
            for n in want:
                self._paint(n)
        self._paint_bars()

    async def _repaint_tick(self) -> None:
        """The timer's repaint: flush's work a pane at a time, the event loop let in between, so a key
        pressed while 512 GPU rows are painted moves its cursor before the next pane, not after all of them
        (issue 28: key -> frame at 64 hosts). A key already queued goes first: each pane waits until the
        key's frame is on the display (`_after_input`), so the key's frame renders the key's change, not the
        telemetry's changed cells too. Then, once this tick's frame is drawn, the garbage collector's due
        work (ui/gcpolicy.py)."""
        try:
            want = self._repaint_plan(False)
            if want is None:
                return
            for n in want:
                await self._after_input()
                view = await self.ctl.gpus_view_for_tick(self.pane_width(2)) if n == 2 else None
                if n == 2 and view is None:
                    continue  # painted meanwhile (a key, a filter) from newer data
                await self._after_input()
                with self.batch_update():
                    self._paint(n, view)
                await asyncio.sleep(0)
            await self._after_input()
            self._paint_bars()
        finally:
            if self.gc_policy.installed:
                self.call_after_refresh(self._collect_idle)

    def input_pending(self) -> bool:
        """A key or mouse event queued and not handled yet: in the app's queue, its screen's, or the focused
        widget's (where the app forwards keys)."""
        try:
            nodes = (self, self.screen, self.focused)
        except Exception:  # no screen yet, or torn down
            return False
        for node in nodes:
            queue = getattr(node, "_message_queue", None) if node is not None else None
            waiting = getattr(queue, "values", ())  # Textual's message queue (textual/_queue.py): a deque
            if any(isinstance(m, events.InputEvent) for m in waiting):
                return True
        return False

    async def _after_input(self, limit_s: float | None = None) -> None:
        """Return at once when no input is queued; else once it has been handled and the next frame drawn,
        at most `limit_s` (INPUT_FIRST_S, read when called) later: a held key must not stop the panes for
        good."""
        if not self.input_pending():
            return
        self.ticks_deferred += 1
        deadline = time.monotonic() + (INPUT_FIRST_S if limit_s is None else limit_s)
        while self.input_pending() and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        drawn: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def draw_done() -> None:
            if not drawn.done():
                drawn.set_result(None)

        self.call_after_refresh(draw_done)
        # asyncio.wait, not wait_for: Python 3.11's wait_for returns the result when the future completes as
        # the task is cancelled, swallowing the cancel; the repaint timer then never ended and the app's exit
        # waited on it for good (a TUI story test's app exit, stuck in Timer._stop_all, under load)
        await asyncio.wait({drawn}, timeout=max(0.001, deadline - time.monotonic()))

    def _collect_idle(self) -> None:
        """After a repaint tick's frame: the collector's due work, unless input came meanwhile."""
        if not self.input_pending():
            self.gc_policy.collect_idle()

    def _settle_heap(self) -> None:
        """Once the app is up: its heap frozen out of the collector, and collections moved between frames."""
        freeze_heap()
        self.gc_policy.install()

    def on_unmount(self) -> None:
        self.gc_policy.uninstall()  # Python's thresholds back (tests run many apps in one process)

    def _repaint_plan(self, force: bool) -> list[int] | None:
        """The visible panes to paint now (None: nothing changed); hidden ones wait in `stale`."""
        now = time.monotonic()
        if now - self._last_clock_paint >= 1.0:
            self._last_clock_paint = now
            self._dirty.add("fleet")
        if not force and not self.ctl.dirty and not self.ctl.stale:
            return None
        fleet_changed = force or "fleet" in self.ctl.dirty
        want = self.ctl.take_dirty(force)
        if fleet_changed:
            banner = self.ctl.banner()  # an attached fleet says where its data comes from
            if banner is not None:
                self.sub_title = banner
                self._short_banner(banner)
        visible = self._visible()
        out: list[int] = []
        for n in sorted(want):
            if n not in visible and not force:
                self.ctl.stale.add(n)  # painted when its tab shows (hidden panes cost nothing)
                continue
            self.ctl.stale.discard(n)
            out.append(n)
        return out

    def _paint_bars(self) -> None:
        self._paint_topbar()
        self._paint_message_bar()
        self.paint_count += 1

    def _paint_topbar(self) -> None:
        try:
            bar = self.query_one("#topbar", Static)
        except NoMatches:  # not composed yet, or torn down while the app exits (a last refresh tick)
            return
        width = max(20, (self.size.width or 80) - 2)
        set_static(bar, topbar(self._snap, self.now(), self.sub_title, width, self.mode_short), one_line=True)

    def _paint(self, n: int, built: GpusView | None = None) -> None:
        """One pane from its view (`built`: the GPU view built off the loop); a bad sample must not take the
        app down."""
        try:
            pane = self.pane(n)
        except NoMatches:  # torn down while the app exits (a repaint already queued), or not composed yet
            return
        pane.planned_width = self.pane_width(n)
        try:
            if isinstance(pane, HostsPane):
                pane.show_view(self.ctl.hosts_view(pane.planned_width))
            elif isinstance(pane, GpusPane):
                self.ctl.gpu_paints += 1
                pane.show_view(built or self.ctl.gpus_view(pane.planned_width))
            elif isinstance(pane, ServicesPane):
                pane.show_view(self.ctl.services_view(pane.planned_width))
            elif isinstance(pane, LogsPane):
                pane.show_view(self.ctl.logs_view())
            elif isinstance(pane, TodosPane):
                pane.show_view(self.ctl.todos_view())
            elif isinstance(pane, BenchPane):
                pane.show_view(self.ctl.bench_view())
        except Exception as e:
            self.log.error(f"pane {n} failed to render: {e!r}")

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        tab = event.tab.id if event.tab is not None else None
        if tab is None or tab == self.active_tab:
            return
        self.active_tab = tab
        self._layout()
        self.ctl.stale |= {n for n, t in PANE_TAB.items() if t == tab}
        self.flush()

    # --- selection messages ------------------------------------------------------------------------------
    def on_service_selected(self, msg: ServiceSelected) -> None:
        self.ctl.select_service(msg.ref)

    def on_drill_down(self, msg: DrillDown) -> None:
        """Enter on a host, GPU or service row: its detail screen (Esc back)."""
        view = self.detail_view(msg.kind, msg.key)
        if view is None:
            self.notify(f"{msg.kind} {msg.key}: nothing to show", severity="warning")
            return
        self.push_screen(DetailScreen(view))

    def detail_view(self, kind: str, key: str) -> DetailView | None:
        return self.ctl.detail_view(kind, key)

    def on_host_selected(self, msg: HostSelected) -> None:
        self.select_host(msg.host)

    def select_host(self, host: str | None) -> None:
        if self.ctl.select_host(host):
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
            self.ctl.stale |= {m for m, t in PANE_TAB.items() if t == self.active_tab}
            self.flush()
        # focused now, before the next key is read: a key typed right after the pane's number (a fast typist,
        # tmux send-keys, a paste) is queued behind it, and went to the pane left behind while the focus waited
        # for the next refresh; again after it, for a main widget that only becomes focusable once laid out
        self._focus_pane_main(n)
        self.call_after_refresh(self._focus_pane_main, n)

    def _focus_pane_main(self, n: int) -> None:
        """The pane's main widget focused at once, on its own screen (Widget.focus waits a turn); a `/` typed
        meanwhile keeps the focus in the filter."""
        if self.focused is not None and self.focused.id == "filter":
            return
        target = self.pane(n).main_widget()
        if target.focusable:
            target.screen.set_focus(target)

    def action_service(self, verb: str) -> None:
        ref = self.selected_service
        if ref is None:
            self.notify("no service selected", severity="warning")
            return
        self.request_service(verb, ref)

    def on_service_request(self, msg: ServiceRequest) -> None:
        self.request_service(msg.verb, msg.ref, msg.to_host)

    def on_service_intent(self, msg: ServiceIntent) -> None:  # confirmed: to fleet.do in a worker
        self.ctl.start_intent(msg.intent)

    def request_service(self, verb: str, ref: str, to_host: str | None = None) -> None:
        """Every way to act on a service ends here (keys, palette, messages): ui/service_actions.py."""
        if verb in self.INTENT_VERBS and self.refuse_read_only(f"{verb} {ref}"):  # K2: read-only
            return
        self.services.request(verb, ref, to_host)

    def action_logs(self) -> None:
        if self.selected_service:
            self.request_service("logs", self.selected_service)

    # --- doctor ------------------------------------------------------------------------------------------
    def action_sweep(self) -> None:
        if self.refuse_read_only("sweep"):  # K2: read-only
            return
        open_sweep(self)

    def action_doctor(self) -> None:
        host = self.ctl.doctor_host()
        if host is None:
            self.notify("no host to check", severity="warning")
            return
        self.open_doctor(host)

    def open_doctor(self, host: str) -> None:
        """The checks run in the screen's worker, over the fleet's open transport to the host."""
        self.push_screen(DoctorScreen(host, self.ctl.doctor))

    # --- bench and todos (ui/bench_actions.py, ui/todo_actions.py) ----------------------------------------
    def action_bench(self) -> None:
        if self.refuse_read_only("bench"):  # K2: read-only
            return
        self.bench.open_ready()

    # --- issue 28 (K2): read-only mode (--readonly, a replay, an attach without a token) ---------------------
    INTENT_VERBS: ClassVar[frozenset[str]] = frozenset({"launch", "kill", "restart", "move", "bench"})

    def read_only_reason(self) -> str | None:
        """Why no intent runs here, in words; None when they do."""
        if self.readonly:
            return "read-only (--readonly): nothing is launched, killed, moved, benchmarked or edited"
        return self.fleet.read_only_reason() if isinstance(self.fleet, ReadOnlyFleet) else None

    def refuse_read_only(self, what: str) -> bool:
        """True (and the reason, at once) when `what` may not run in this view."""
        why = self.read_only_reason()
        if why is None:
            return False
        self.notify(f"{what}: {why}", severity="error", timeout=8)
        return True

    def _short_banner(self, banner: str) -> None:
        """The banner's first part whole (`COLLECTOR LOST at 19:02:03`, never cut at its colon), marked
        READ-ONLY when intents are refused, for the top bar when the long banner does not fit."""
        if self.demo:
            return
        head = banner.split(" · ", 1)[0]
        self.mode_short = head + (" · READ-ONLY" if self.read_only_reason() else "")

    # --- issue 28 (K2): stop what runs (x, Esc in the Bench pane, its Stop button, the palette) -------------
    def action_stop_run(self) -> None:
        """Stop the bench, ladder or soak in flight: what was measured is saved (ui/bench_actions.py). Not
        from under a dialog: there `x` is a letter typed or a tick, never a stop."""
        if isinstance(self.screen, ModalScreen):
            return
        self.bench.stop()

    def on_bench_intent(self, msg: BenchIntent) -> None:
        self.start_bench(msg.params)

    def start_bench(self, params: BenchRequest) -> None:
        self.bench.start_bench(params)

    def on_shape_intent(self, msg: ShapeIntent) -> None:
        if self.refuse_read_only(msg.params.what):  # K2: read-only
            return
        self.bench.start_shape(msg.refs, msg.params)

    def action_new_todo(self) -> None:
        if self.refuse_read_only("new todo"):  # K2: read-only
            return
        self.todos.new()

    def on_todo_intent(self, msg: TodoIntent) -> None:
        if self.refuse_read_only("todo"):  # K2: read-only
            return
        self.todos.on_intent(msg)

    # --- profiles, keys: movement, command mode, help (K1, issue 28); themes are ui/theming.py -----------
    def action_reload_profiles(self) -> None:
        self.notify("reloading host profiles …", timeout=3)
        self.run_worker(self.ctl.reload_profiles(), group="reload", exclusive=True, name="reload profiles")

    def action_nav(self, key: str) -> None:
        """j/k/g/G/Home/End on whatever is focused (ui/navigation.py); passed on where they mean nothing."""
        navigation.move(self, key)

    def action_command(self) -> None:
        """`:` (k9s): a command line at the bottom; what it runs is ui/command.py."""
        self.push_screen(
            CommandScreen(self, self.command_history), lambda text: run_command(self, text) if text else None
        )

    def help_groups(self) -> list[tuple[str, list[Binding]]]:
        """What `?` lists for the current screen, read from the bindings (ui/screens/help.py help_groups)."""
        return help_groups(self, self.screen)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_groups()))

    async def action_help_quit(self) -> None:  # type: ignore[override]  # Textual awaits async actions
        """ctrl+c leaves like `q` (Textual's default only says 'press ctrl+q')."""
        await self.action_quit()

    # --- quitting ----------------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        await self.shutdown_fleet()
        self.exit(0)

    async def shutdown_fleet(self, *, running: bool = True) -> None:
        await self.ctl.shutdown(running=running)


FREEZE_AFTER_S = 3.0  # the app, its fleet and their first samples are up by then


def freeze_heap() -> None:
    """What the app holds once it is up (modules, styles, widgets: ~280,000 objects) leaves the garbage
    collector's generations (gc.freeze): each collection walked all of it, and the collections a 512-row
    GPU view sets off were most of its build time (benchmarks/ui.py, issue 28). Collected once first, so no
    garbage is kept; what the app makes later is collected as usual."""
    gc.collect()
    gc.freeze()


__all__ = ["DDTreeApp", "exit_code"]  # exit_code lives in ui/crash.py; cli/tui.py imports it from here

"""The app's controller: the one reader of the fleet. It consumes the fleet's events (marking what is dirty),
keeps the selection, the `/` filter and the log tail, builds each pane's typed view from the latest
snapshot, and carries intents to the fleet in workers. No widget here: the app (the view) asks it what to
paint and hands it the user's actions, so panes never reach into the fleet while painting."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual.notifications import SeverityLevel

from ddtree_tui.model import events
from ddtree_tui.model.intents import Move, Outcome, ServiceIntent
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.ui.backend import Deferred, FleetLike, FrozenFleet
from ddtree_tui.ui.details import DetailView, gpu_detail, host_detail, service_detail
from ddtree_tui.ui.views import (
    BenchView,
    GpusView,
    HistoryRun,
    HostsView,
    LogsView,
    PaneInputs,
    ServicesView,
    TodosView,
    gpu_keys,
    gpus_view,
    hosts_view,
    services_view,
)

if TYPE_CHECKING:  # loaded when used, not before the first frame (issue 28): the doctor, the smoke client
    from ddtree_tui.bench.smoke import SmokeResult
    from ddtree_tui.doctor import DoctorReport

LOG_BUF_MAX = 500
ALL = frozenset({"fleet", "todos", "bench", "logs"})
# which panes each kind of change repaints ("telemetry": a GPU/host sample, painted as "fleet" at most once
# a TELEMETRY_PERIOD: 64 hosts sampled each second arrive spread over it, and repainting 512 GPU rows on every
# 5 Hz tick for the few that moved was most of the frame time, issue 28; nvitop repaints every 2 s)
PANES_OF = {"fleet": {1, 2, 3}, "todos": {4}, "bench": {5}, "logs": {6}}
TELEMETRY_PERIOD = 1.0
OFF_LOOP_GPUS = (
    64  # a GPU pane of this many GPUs (8 hosts x 8) builds its view in a thread (gpus_view_for_tick)
)


@runtime_checkable
class Clocked(Protocol):
    """A fleet with its own clock: a replay shows ages against its recorded time."""

    def clock(self) -> float: ...


@runtime_checkable
class Bannered(Protocol):
    """A fleet that says where its data comes from (an attached collector, a recording)."""

    def banner(self) -> str: ...


@runtime_checkable
class WithHistoryFile(Protocol):
    """The fleet's bench history file, watched for runs made elsewhere (`run-bench`, another terminal)."""

    history_path: Path


class ViewHost(Protocol):
    """What the controller needs from the app: messages, the live bench pane, and workers."""

    def notify(
        self, message: str, *, severity: SeverityLevel = "information", timeout: float | None = None
    ) -> None: ...

    def bench_event(self, event: object) -> None: ...

    def spawn(
        self, work: Coroutine[object, object, object], group: str, name: str = "", exclusive: bool = False
    ) -> None: ...


class Controller:
    """State between the fleet and the panes; `live=False` (a frozen fleet) starts nothing."""

    def __init__(
        self,
        fleet: FleetLike,
        host: ViewHost,
        *,
        live: bool,
        stop_timeout: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fleet = fleet
        self.clock = clock  # a live fleet's "now" (tests inject one to age values without waiting)
        self.host = host
        self.live = live
        self.stop_timeout = stop_timeout
        self.snap: FleetSnapshot = fleet.snapshot()
        self.selected_service: str | None = None
        self.selected_host: str | None = None
        self.filter_text = ""
        self.filter_pane = 0
        self.dirty: set[str] = set(ALL)
        self.stale: set[int] = set()
        self.bench_history: list[HistoryRun] = []
        self.busy: set[str] = set()
        self.fleet_started = False
        self.fleet_stopped = False
        self._stopping: asyncio.Task[None] | None = None
        self._log_buf: list[str] = []
        self._log_overflow = False
        self._logs_shown: tuple[str | None, str] | None = None
        self._history_sig: tuple[int, int] | str | None = "unset"
        self._fleet_painted_at = -TELEMETRY_PERIOD
        self.gpu_paints = 0  # GPU pane paints (the app counts): a view built in a thread meanwhile is dropped

    # --- events ------------------------------------------------------------------------------------------
    async def run_fleet(self) -> None:
        """Start the fleet and mark panes dirty from its events until cancelled (the app exits)."""
        q = self.fleet.subscribe()
        try:
            self.fleet_started = True
            # painted before the core was imported (cli/tui.py's StartingFleet): build it, then use the real one
            if isinstance(self.fleet, Deferred):
                built = await self.fleet.build()
                if built is None or self.fleet_stopped:  # the app quit meanwhile: start nothing
                    return
                self.fleet = built
            await self.fleet.start()
            while True:
                self.on_event(await q.get())
                while not q.empty():
                    self.on_event(q.get_nowait())
        finally:
            self.fleet.unsubscribe(q)

    def on_event(self, ev: object) -> None:
        if isinstance(ev, events.GpuSampleEvent):
            self.dirty.add("telemetry")
        elif isinstance(ev, events.HostStateChanged | events.ServiceStateChanged):
            self.dirty.add("fleet")
        elif isinstance(ev, events.LogLine):
            if f"{ev.host}/{ev.service}" == self.selected_service:
                self._log_buf.append(ev.line)
                if len(self._log_buf) > LOG_BUF_MAX:  # hidden for long: reload from the fleet's tail at paint
                    del self._log_buf[: len(self._log_buf) - LOG_BUF_MAX]
                    self._log_overflow = True
                self.dirty.add("logs")
        elif isinstance(ev, events.BenchEventWrap):
            self.host.bench_event(ev.event)
            self.dirty.add("bench")
        elif isinstance(ev, events.TodoChanged):
            self.dirty.add("todos")
        elif isinstance(ev, events.Notice):
            self.host.notify(ev.text, severity=ev.severity, timeout=6 if ev.severity != "error" else 10)

    # --- what to paint -----------------------------------------------------------------------------------
    def now(self) -> float:
        """The clock panes use: frozen at the snapshot's time when nothing is live (stable screenshots)."""
        if isinstance(self.fleet, Clocked):
            return float(self.fleet.clock())
        if isinstance(self.fleet, FrozenFleet):
            return self.fleet.frozen_at()
        return self.clock() if self.live else self.snap.ts

    def banner(self) -> str | None:
        return self.fleet.banner() if isinstance(self.fleet, Bannered) else None

    def refresh_snapshot(self) -> None:
        self.snap = self.fleet.snapshot()
        self.pick_default_service()

    def take_dirty(self, force: bool = False) -> set[int]:
        """The panes to paint now (a new snapshot read when the fleet changed); clears the dirty set."""
        if force:
            self.dirty |= ALL
        keep: set[str] = set()
        if "telemetry" in self.dirty:
            self.dirty.discard("telemetry")
            if "fleet" in self.dirty or time.monotonic() - self._fleet_painted_at >= TELEMETRY_PERIOD:
                self.dirty.add("fleet")
            else:
                keep.add("telemetry")  # painted with the next fleet change or when the period is up
        if "fleet" in self.dirty:
            self.refresh_snapshot()
            self._fleet_painted_at = time.monotonic()
        want = {n for kind in self.dirty for n in PANES_OF.get(kind, ())} | self.stale
        self.dirty = keep
        return want

    def pick_default_service(self) -> None:
        refs = [f"{h.name}/{s.name}" for h in self.snap.hosts for s in h.services]
        if self.selected_service not in refs:
            self.selected_service = refs[0] if refs else None
            self.dirty.add("logs")

    def inputs(self, pane: int, width: int) -> PaneInputs:
        return PaneInputs(
            now=self.now(),
            width=width,
            filter=self.filter_text if self.filter_pane == pane else "",
            selected_host=self.selected_host,
            selected_service=self.selected_service,
        )

    def hosts_view(self, width: int) -> HostsView:
        return hosts_view(self.snap, self.inputs(1, width))

    def gpus_view(self, width: int) -> GpusView:
        return self._build_gpus_view(self.snap, self.inputs(2, width))

    def _build_gpus_view(self, snap: FleetSnapshot, inp: PaneInputs) -> GpusView:
        """The GPU view of `snap`, with each shown GPU's utilisation history read now."""
        history = {
            (h, i): self.fleet.gpu_history(h, i, "util_gpu") for h, i in gpu_keys(snap, inp.selected_host)
        }
        return gpus_view(snap, replace(inp, history=history))

    def gpu_rows(self) -> int:
        """How many GPUs the GPU pane shows (its process rows not counted)."""
        return sum(
            len(h.gpus) for h in self.snap.hosts if not self.selected_host or h.name == self.selected_host
        )

    async def gpus_view_for_tick(self, width: int) -> GpusView | None:
        """The timer repaint's GPU view. A long one (OFF_LOOP_GPUS or more GPUs) is built in a thread while the
        loop keeps taking keys (issue 28: 512 GPU rows took ~55 ms of the UI thread each second at 64 hosts x
        8 GPUs, and a key pressed meanwhile waited for all of it); the pane then paints only its changed rows
        near the viewport. The snapshot is frozen and the selection is read here, on the loop; the thread reads
        the histories too (512 copies of up to 600 values: ~19 ms, issue 28), each a copy the history's array
        makes in one C call (array.tolist), which the sampler's appends on the loop cannot interleave with.
        None: the pane was painted meanwhile (a key, a filter) from newer data, so this one is dropped."""
        if self.gpu_rows() < OFF_LOOP_GPUS:
            return self.gpus_view(width)
        painted = self.gpu_paints
        try:
            view = await asyncio.to_thread(self._build_gpus_view, self.snap, self.inputs(2, width))
        except Exception:  # built again on the loop, where the app's paint logs what fails
            return self.gpus_view(width)
        return view if painted == self.gpu_paints else None

    def services_view(self, width: int) -> ServicesView:
        return services_view(self.snap, self.inputs(3, width))

    def todos_view(self) -> TodosView:
        """Read fresh from the fleet: a TodoChanged repaints this pane alone, without a new snapshot."""
        return TodosView(self.fleet.snapshot().todos, self.filter_text if self.filter_pane == 4 else "")

    def bench_view(self) -> BenchView:
        return BenchView(tuple(self.bench_history), self.filter_text if self.filter_pane == 5 else "")

    def logs_view(self) -> LogsView:
        """The tail since the last paint, or every line when the service, the search or the buffer changed."""
        ref, search = self.selected_service, self.filter_text if self.filter_pane == 6 else ""
        overflow, self._log_overflow = self._log_overflow, False
        buf, self._log_buf = self._log_buf, []
        if not overflow and self._logs_shown == (ref, search):
            return LogsView(ref, search, tuple(buf), reset=False)
        self._logs_shown = (ref, search)
        return LogsView(ref, search, tuple(self.fleet.log_lines(ref) if ref else []), reset=True)

    def detail_view(self, kind: str, key: str) -> DetailView | None:
        """Everything about one host, GPU (HOST:INDEX) or service (HOST/SVC), read fresh for Enter."""
        snap, now = self.fleet.snapshot(), self.now()
        if kind == "service":
            return service_detail(snap, key, self.fleet.log_lines(key), now)
        if kind == "gpu":
            host, _, idx = key.partition(":")
            index = idx.split(":")[0]
            hist = self.fleet.gpu_history(host, int(index), "util_gpu") if index.isdigit() else []
            return gpu_detail(snap, key, hist)
        return host_detail(snap, key, now)

    # --- selection ---------------------------------------------------------------------------------------
    def select_service(self, ref: str) -> None:
        if ref != self.selected_service:
            self.selected_service = ref
            self._log_buf = []
            self.dirty.add("logs")

    def select_host(self, host: str | None) -> bool:
        if host == self.selected_host:
            return False
        self.selected_host = host
        self.dirty.add("fleet")
        return True

    def doctor_host(self) -> str | None:
        """The selected host, else the selected service's host, else the first host."""
        if self.selected_host:
            return self.selected_host
        if self.selected_service:
            return self.selected_service.split("/", 1)[0]
        hosts = [h.name for h in self.snap.hosts] or [p.name for p in self.fleet.profiles()]
        return hosts[0] if hosts else None

    # --- intents (each runs in a worker the app starts) -------------------------------------------------
    def start_intent(self, intent: ServiceIntent) -> None:
        """A launch, kill, restart or move, carried to `fleet.do` in a worker (one at a time a service)."""
        ref = str(intent.ref)
        if ref in self.busy:
            self.host.notify(f"{ref} is busy with another action", severity="warning")
            return
        self.busy.add(ref)
        to = f" → {intent.to_host}" if isinstance(intent, Move) else ""
        self.host.notify(f"{intent.kind} {ref}{to} …", timeout=3)
        self.host.spawn(self.do_intent(intent), group=f"svc:{ref}", name=f"{intent.kind} {ref}")

    async def do_intent(self, intent: ServiceIntent) -> Outcome | None:
        ref = str(intent.ref)
        try:
            res = await self.fleet.do(intent)
            if not self.live:  # a live fleet reports results as Notice events
                self.host.notify(res.message, severity="information" if res.ok else "error")
            return res
        except Exception as e:
            self.host.notify(f"{intent.kind} {ref} failed: {e}", severity="error", timeout=10)
            return None
        finally:
            self.busy.discard(ref)
            self.dirty.add("fleet")

    def smoke(self, ref: str) -> None:
        self.host.notify(f"smoke {ref} …", timeout=3)
        self.host.spawn(self.do_smoke(ref), group=f"smoke:{ref}", name=f"smoke {ref}", exclusive=True)

    async def do_smoke(self, ref: str) -> SmokeResult | None:
        """Read-only, so it does not mark the service busy; a live fleet reports it as a Notice event."""
        try:
            res = await self.fleet.smoke(ref)
        except Exception as e:
            self.host.notify(f"smoke {ref} failed: {e}", severity="error", timeout=10)
            return None
        if not self.live:
            self.host.notify(res.line(), severity="information" if res.ok else "error", timeout=10)
        return res

    async def doctor(self, host: str) -> DoctorReport:
        """The doctor screen's checks, over the fleet's open transport to the host (run in its worker)."""
        return await self.fleet.doctor(host)

    async def reload_profiles(self) -> None:
        """Edited profiles (a port after a refusal, a new host) without a restart; the fleet reports it."""
        try:
            await self.fleet.reload_profiles()
        except Exception as e:  # a bad profile: the fleet already said which file, line and field
            if not self.live:
                self.host.notify(f"profiles not reloaded: {e}", severity="error", timeout=10)
        self.dirty.add("fleet")

    # --- bench history -----------------------------------------------------------------------------------
    async def load_bench_history(self) -> None:
        try:
            self.bench_history = await asyncio.to_thread(self.fleet.bench_history)
        except Exception as e:  # reported, never fatal
            self.host.notify(f"bench history: {e}", severity="warning")
        self.dirty.add("bench")

    async def check_history(self) -> None:
        """A run made headless (`--run-bench`, another terminal) while the TUI is open: its line lands in
        the history file; reload when the file's size or mtime moved (a stat off the UI path)."""
        if not isinstance(self.fleet, WithHistoryFile):
            return
        try:
            st = await asyncio.to_thread(Path(self.fleet.history_path).stat)
            sig: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
        except OSError:
            sig = None
        if sig != self._history_sig:  # (the first check reads it once more: cheap, and no race at start)
            self._history_sig = sig
            await self.load_bench_history()

    # --- stopping ----------------------------------------------------------------------------------------
    async def shutdown(self, *, running: bool = True) -> None:
        """Stop watchers and, in the demo, the simulated services we launched; bounded in time. `running`:
        the app is still on screen to say so (False after it left).

        The stop is one task, and each caller waits for it at most `stop_timeout` (asyncio.wait): a bound that
        holds even when something inside the stop swallows a cancel (an `asyncio.timeout` around the stop
        needs the cancel to come back out; the stop's waits on its tasks used to swallow it). A second caller
        (a hangup during a slow `q`, the run's last stop) waits for the same stop, not returning while it runs."""
        if not self.fleet_started:
            return
        if self._stopping is None:
            self.fleet_stopped = True
            if running:
                self.host.notify("stopping…", timeout=2)
            self._stopping = asyncio.create_task(self._stop_fleet(), name="fleet-stop")
        done, _ = await asyncio.wait({self._stopping}, timeout=self.stop_timeout)
        if not done:
            self._stopping.cancel()  # whatever it does with the cancel, nobody waits on it any longer
            print(f"ddtree-tui: stopping the fleet: not done after {self.stop_timeout:g} s", file=sys.stderr)

    async def _stop_fleet(self) -> None:
        try:
            await self.fleet.stop()
        except Exception as e:
            print(f"ddtree-tui: stopping the fleet: {e}", file=sys.stderr)

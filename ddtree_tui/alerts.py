"""Alerts: conditions a person should look at now, raised and cleared from the fleet's own events.

- accept_collapse: a ready service's accept length below `accept_collapse_ratio` × the running median of
  its last `accept_window` samples, once `accept_min_samples` are in. A sample is one new observation of
  real decode traffic by the process now running (accept length above 0, a new `observed_at` stamp); the
  window starts empty with every new process (a launch, a restart, a new pid), so a fresh server's empty
  window is not a collapse.
- gpu_xid / gpu_off_bus / gpu_fault: a GPU reports an XID error, fell off the bus (lost, no longer reported,
  unknown error), or another fault.
- gpu_throttle: a GPU's clocks are held down for one of `throttle_reasons` (thermal, power brake, HW slowdown).
- restart_loop: a service went down unasked `restart_count` times in `restart_window_s`: it crashed, or went
  back to starting after running without anyone asking. Restarts asked for (a ServicePlanned event: the
  user's intents through the fleet's service desk, a sweep's deploys) and anything while a sweep holds the
  service (its planned relaunches, its points that fail to start) are not counted, nor while a sweep in
  another ddtree-tui process on this machine holds it (its hold file).

Thresholds come from each host profile's `[alerts]` table. The engine subscribes to the fleet like any reader
and publishes AlertChanged (for the collector's /metrics and /events, and recordings) plus a Notice (for the
TUI) when an alert is raised or cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from ddtree_tui.config import AlertOptions, HostProfile
from ddtree_tui.model.events import (
    AlertChanged,
    FleetEvent,
    GpuSampleEvent,
    Notice,
    ServicePlanned,
    ServiceStateChanged,
)
from ddtree_tui.model.snapshot import Alert, AlertKind, GpuSample

# the events AlertEngine.handle reads (every other kind it ignores)
ALERT_INPUTS: tuple[type, ...] = (GpuSampleEvent, ServiceStateChanged, ServicePlanned)
TICK_S = 5.0  # how often the engine checks what only time ends (a restart loop whose window passed)
PLANNED_FOR_S = 120.0  # how long a planned launch / restart waits for its service to show it is starting
OFF_BUS = ("lost", "off the bus", "no longer reported", "unknown error", "requires reset", "device handle")


class AlertSource(Protocol):
    def subscribe(self, kinds: tuple[type, ...] = ...) -> asyncio.Queue[FleetEvent]: ...
    def unsubscribe(self, q: asyncio.Queue[FleetEvent]) -> None: ...
    def publish(self, ev: FleetEvent) -> None: ...
    def profiles(self) -> list[HostProfile]: ...


def gpu_fault_kind(g: GpuSample) -> AlertKind | None:
    if g.health != "fault" and not g.fault:
        return None
    text = (g.fault or "").lower()
    if "xid" in text:
        return "gpu_xid"
    if any(k in text for k in OFF_BUS):
        return "gpu_off_bus"
    return "gpu_fault"


class AlertEngine:
    """Keeps the active alerts; `handle()` one event at a time (or `run()` on a fleet until cancelled)."""

    def __init__(
        self,
        options: Callable[[str], AlertOptions],
        emit: Callable[[FleetEvent], None],
        held_elsewhere: Callable[[str, str], bool] | None = None,
    ) -> None:
        self._options = options
        self._emit = emit
        # (host, service) -> whether a sweep in another ddtree-tui process holds it (its relaunches are its plan)
        self._held_elsewhere = held_elsewhere or (lambda host, svc: False)
        self.active: dict[tuple[str, str, str], Alert] = {}
        self._accept: dict[tuple[str, str], deque[float]] = {}
        self._accept_seen: dict[tuple[str, str], float] = {}  # observed_at of the last sample taken
        self._state: dict[tuple[str, str], tuple[str, int | None]] = {}  # last state and pid seen
        self._planned: dict[tuple[str, str], float] = {}  # a planned (re)start expected until then
        self._held: dict[tuple[str, str], str] = {}  # held by a sweep: its relaunches are planned
        self._restarts: dict[tuple[str, str], deque[float]] = {}

    def alerts(self) -> list[Alert]:
        return sorted(self.active.values(), key=lambda a: (a.host, a.subject, a.kind))

    # --- raising and clearing ----------------------------------------------------------------------------
    def _set(self, kind: AlertKind, host: str, subject: str, on: bool, message: str, now: float,
             severity: str = "error") -> None:  # fmt: skip
        key = (kind, host, subject)
        cur = self.active.get(key)
        if on and cur is None:
            a = Alert(kind=kind, host=host, subject=subject, message=message, severity=severity, since=now)  # type: ignore[arg-type]
            self.active[key] = a
            self._emit(AlertChanged(alert=a))
            self._emit(
                Notice(
                    severity="error" if severity == "error" else "warning",
                    text=f"ALERT {host}/{subject}: {message}",
                )
            )
        elif not on and cur is not None:
            del self.active[key]
            self._emit(AlertChanged(alert=cur.model_copy(update={"active": False})))
            self._emit(
                Notice(severity="information", text=f"cleared {host}/{subject}: {kind.replace('_', ' ')}")
            )

    # --- rules -------------------------------------------------------------------------------------------
    def handle(self, ev: FleetEvent, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if isinstance(ev, GpuSampleEvent):
            self._gpus(ev, now)
        elif isinstance(ev, ServiceStateChanged):
            self._service(ev, now)
        elif isinstance(ev, ServicePlanned):
            self._plan(ev, now)

    def _plan(self, ev: ServicePlanned, now: float) -> None:
        key = (ev.host, ev.service)
        if ev.verb == "hold":
            self._held[key] = ev.by
        elif ev.verb == "release":
            self._held.pop(key, None)
        else:
            self._planned[key] = now + PLANNED_FOR_S
            self._fresh(key)

    def _gpus(self, ev: GpuSampleEvent, now: float) -> None:
        opt = self._options(ev.host)
        for g in ev.gpus:
            subject = f"gpu{g.index}"
            kind = gpu_fault_kind(g) if opt.gpu_faults else None
            for k in ("gpu_xid", "gpu_off_bus", "gpu_fault"):
                self._set(k, ev.host, subject, kind == k, f"GPU {g.index}: {g.fault or 'fault'}", now)
            held = sorted(set(g.throttle_reasons or ()) & set(opt.throttle_reasons))
            self._set("gpu_throttle", ev.host, subject, bool(held), f"GPU {g.index} throttled: {', '.join(held)}",
                      now, "warning")  # fmt: skip

    def _fresh(self, key: tuple[str, str]) -> None:
        """A new process (or one about to be): its accept window starts empty."""
        self._accept.pop(key, None)
        self._accept_seen.pop(key, None)

    def _service(self, ev: ServiceStateChanged, now: float) -> None:
        opt = self._options(ev.host)
        st = ev.status
        key = (ev.host, st.name)
        prev_state, prev_pid = self._state.get(key, (None, None))
        self._state[key] = (st.state, st.pid)
        if st.state == "starting" or (st.pid is not None and prev_pid is not None and st.pid != prev_pid):
            self._fresh(key)
        # accept length against its running median, over real decode traffic of this process
        if st.state == "ready" and st.accept_length is not None and st.accept_length > 0:
            seen = st.observed_at.get("accept_length")
            if seen is None or seen != self._accept_seen.get(key):  # a new observation, not a repeat
                if seen is not None:
                    self._accept_seen[key] = seen
                win = self._accept.setdefault(key, deque(maxlen=opt.accept_window))
                if len(win) >= opt.accept_min_samples:
                    med = statistics.median(win)
                    low = st.accept_length < opt.accept_collapse_ratio * med
                    msg = f"accept length {st.accept_length:.2f}, running median {med:.2f}"
                    self._set("accept_collapse", ev.host, st.name, low, msg, now)
                win.append(st.accept_length)
        # a collapse is of a serving process; a new one starts afresh
        if st.state not in ("ready", "unhealthy"):
            self._set("accept_collapse", ev.host, st.name, False, "", now)
        # going down unasked within a window: a crash, or back to starting after running
        planned = self._planned.get(key, 0.0) >= now
        # a crash counts once per process (a relaunch that dies before it is seen starting has a new pid); one
        # found at the first look (a pidfile left from before we watched) is not news
        crashed = (
            st.state == "crashed"
            and prev_state not in (None, "unknown")
            and (prev_state != "crashed" or st.pid != prev_pid)
        )
        went_down = crashed or (
            st.state == "starting" and prev_state in ("ready", "unhealthy") and not planned
        )
        if st.state == "starting":
            self._planned.pop(key, None)
        if went_down and key not in self._held and not self._held_elsewhere(*key):
            self._restarts.setdefault(key, deque()).append(now)
        self._restart_check(key, opt, now)

    def _restart_check(self, key: tuple[str, str], opt: AlertOptions, now: float) -> None:
        times = self._restarts.get(key)
        if times is None:
            return
        while times and now - times[0] > opt.restart_window_s:
            times.popleft()
        n = len(times)
        self._set("restart_loop", key[0], key[1], n >= opt.restart_count,
                  f"crashed or restarted unasked {n} times in {opt.restart_window_s:g} s", now)  # fmt: skip

    def tick(self, now: float | None = None) -> None:
        """Clear restart loops whose window has passed (no event would say so)."""
        now = time.time() if now is None else now
        for key in list(self._restarts):
            self._restart_check(key, self._options(key[0]), now)


def held_elsewhere(profiles: Callable[[], list[HostProfile]]) -> Callable[[str, str], bool]:
    """Whether a sweep in another ddtree-tui process on this machine holds HOST/SVC (its hold file, scoped to
    where the service lives): a `sweep` run from a shell relaunches what this fleet watches."""

    def check(host: str, service: str) -> bool:
        # imported when first asked: the hold files bring psutil and the launch line (the simulator's argv),
        # which a run with no host never needs (`--run-bench --url`: ~0.1 s of its start)
        from ddtree_tui.services import holdfiles

        prof = next((p for p in profiles() if p.name == host), None)
        return (
            prof is not None and holdfiles.holder(f"{host}/{service}", holdfiles.place_of(prof)) is not None
        )

    return check


async def run_alerts(fleet: AlertSource) -> None:
    """Follow `fleet` until cancelled, publishing alerts back into it."""

    def options(host: str) -> AlertOptions:
        prof = next((p for p in fleet.profiles() if p.name == host), None)
        return prof.alerts if prof is not None else AlertOptions()

    engine = AlertEngine(options, fleet.publish, held_elsewhere(fleet.profiles))
    # only the kinds it reads: not woken for the rest (a bench run publishes several events a request)
    q = fleet.subscribe(ALERT_INPUTS)
    loop = asyncio.get_running_loop()
    try:
        while True:
            # every event as it comes, under one deadline for TICK_S: a timeout (a timer made, moved and
            # cancelled) per event was most of what following a run's progress events cost (issue 26)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(loop.time() + TICK_S):
                    while True:
                        engine.handle(await q.get())
                        while not q.empty():
                            engine.handle(q.get_nowait())
            engine.tick()
    finally:
        fleet.unsubscribe(q)

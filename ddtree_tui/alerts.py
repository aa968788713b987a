"""Alerts: conditions a person should look at now, raised and cleared from the fleet's own events.

- accept_collapse: a ready service's accept length below `accept_collapse_ratio` × the running median of
  its last `accept_window` samples (once `accept_min_samples` are in).
- gpu_xid / gpu_off_bus / gpu_fault: a GPU reports an XID error, fell off the bus (lost, no longer reported,
  unknown error), or another fault.
- gpu_throttle: a GPU's clocks are held down for one of `throttle_reasons` (thermal, power brake, HW slowdown).
- restart_loop: a service went back to starting after running `restart_count` times in `restart_window_s`.

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
from typing import Any, Protocol

from ddtree_tui.config import AlertOptions, HostProfile
from ddtree_tui.model.events import AlertChanged, FleetEvent, GpuSampleEvent, Notice, ServiceStateChanged
from ddtree_tui.model.snapshot import Alert, AlertKind, GpuSample

OFF_BUS = ("lost", "off the bus", "no longer reported", "unknown error", "requires reset", "device handle")


class AlertSource(Protocol):
    def subscribe(self) -> asyncio.Queue[Any]: ...
    def unsubscribe(self, q: asyncio.Queue[Any]) -> None: ...
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

    def __init__(self, options: Callable[[str], AlertOptions], emit: Callable[[FleetEvent], None]) -> None:
        self._options = options
        self._emit = emit
        self.active: dict[tuple[str, str, str], Alert] = {}
        self._accept: dict[tuple[str, str], deque[float]] = {}
        self._ran: set[tuple[str, str]] = set()
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
    def handle(self, ev: Any, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if isinstance(ev, GpuSampleEvent):
            self._gpus(ev, now)
        elif isinstance(ev, ServiceStateChanged):
            self._service(ev, now)

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

    def _service(self, ev: ServiceStateChanged, now: float) -> None:
        opt = self._options(ev.host)
        st = ev.status
        key = (ev.host, st.name)
        # accept length against its running median
        if st.state == "ready" and st.accept_length is not None:
            win = self._accept.setdefault(key, deque(maxlen=opt.accept_window))
            if len(win) >= opt.accept_min_samples:
                med = statistics.median(win)
                low = st.accept_length < opt.accept_collapse_ratio * med
                msg = f"accept length {st.accept_length:.2f}, running median {med:.2f}"
                self._set("accept_collapse", ev.host, st.name, low, msg, now)
            win.append(st.accept_length)
        # restarts within a window
        if st.state in ("ready", "unhealthy", "crashed"):
            self._ran.add(key)
        elif st.state == "starting" and key in self._ran:
            self._ran.discard(key)
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
                  f"restarted {n} times in {opt.restart_window_s:g} s", now)  # fmt: skip

    def tick(self, now: float | None = None) -> None:
        """Clear restart loops whose window has passed (no event would say so)."""
        now = time.time() if now is None else now
        for key in list(self._restarts):
            self._restart_check(key, self._options(key[0]), now)


async def run_alerts(fleet: AlertSource) -> None:
    """Follow `fleet` until cancelled, publishing alerts back into it."""

    def options(host: str) -> AlertOptions:
        prof = next((p for p in fleet.profiles() if p.name == host), None)
        return prof.alerts if prof is not None else AlertOptions()

    engine = AlertEngine(options, fleet.publish)
    q = fleet.subscribe()
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    engine.handle(await q.get())
                    while not q.empty():
                        engine.handle(q.get_nowait())
            engine.tick()
    finally:
        fleet.unsubscribe(q)

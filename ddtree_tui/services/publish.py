"""Turning a service's facts into its published status: the one place a ServiceManager's statuses change.

Every part of the manager that learns something (watcher, prober, log follower, launch, kill) writes the fact
into the service's `SvcState` and calls `recompute` (or `set` for fields outside the status rules); this
runs `status.derive_status`, and only a status that differs reaches the listener and wakes `wait_state`.
The listeners are one shared object, so a caller may set `on_status` / `on_log` / `on_metrics` after the
manager is built.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from ddtree_tui.model.snapshot import ServiceStatus
from ddtree_tui.services.logs import LogMetrics
from ddtree_tui.services.status import Facts, derive_status, updated
from ddtree_tui.services.svcstate import SvcState

__all__ = ["Listeners", "Publisher"]

# the Facts that SvcState keeps under the same name
_FACT_FIELDS = tuple(f.name for f in dataclasses.fields(Facts) if f.name in SvcState.__dataclass_fields__)


@dataclass
class Listeners:
    """Who hears about a manager's services (ServiceManager's callbacks; each may be None)."""

    on_status: Callable[[ServiceStatus], None] | None = None
    on_log: Callable[[str, str], None] | None = None
    on_metrics: Callable[[str, LogMetrics], None] | None = None


class Publisher:
    """Publishes a service's status when it changes, and lets a waiter sleep until the next change."""

    def __init__(self, listeners: Listeners, fail_threshold: int, redact: Callable[[str], str]) -> None:
        self._listeners = listeners
        self._fail_threshold = fail_threshold
        self._redact = redact
        self.changed = asyncio.Event()  # set (and replaced) on every published change

    def _notify(self) -> None:
        ev, self.changed = self.changed, asyncio.Event()
        ev.set()

    def publish(self, svc: SvcState, new: ServiceStatus) -> None:
        """Make `new` the service's status and tell the listener, when it differs."""
        if new == svc.status:
            return
        svc.status = new
        cb = self._listeners.on_status
        if cb is not None:
            try:
                cb(new)
            except Exception:  # a subscriber's bug must not stop the watcher
                pass
        self._notify()

    def set(self, svc: SvcState, **upd: object) -> None:
        """Set status fields the rules do not derive (log numbers, last_log) and publish."""
        self.publish(svc, updated(svc.status, time.time(), **upd))

    def recompute(self, svc: SvcState) -> None:
        """The service's status from what is known now (status.derive_status), published."""
        facts = Facts(
            **{k: getattr(svc, k) for k in _FACT_FIELDS},
            last_line=svc.lines[-1] if svc.lines else None,
            fail_threshold=self._fail_threshold,
            redact=self._redact,
        )
        new = derive_status(svc.spec, facts, svc.status, time.time())
        if new.state == "ready" and not svc.unreachable and svc.health is not None and svc.health.ok:
            svc.ever_ready_pid = -1 if svc.spec.launcher == "external" else new.pid
        self.publish(svc, new)

"""What a ServiceManager knows about each service of its host: one `SvcState` a service, kept in a `ServiceBook`.

The book is the one store every part of the manager (`lifecycle.ServiceManager`) reads and writes: the
watcher puts process records in, the prober health, the log follower log lines, launch and kill their
outcome. It holds facts only (no tasks, no I/O); the status they add up to is `status.derive_status`'s, and
publishing it is `publish.Publisher`'s.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.model.snapshot import ServiceStatus
from ddtree_tui.services.health import HealthResult, ServerInfo
from ddtree_tui.services.holdfiles import ServiceHeld  # the hold files keep it (the fleet raises it)
from ddtree_tui.services.logs import LogMetrics
from ddtree_tui.services.replies import WatchRecord
from ddtree_tui.services.sglang_metrics import SglangGauges
from ddtree_tui.services.status import initial_status

__all__ = ["ServiceBook", "ServiceHeld", "SvcState"]


@dataclass
class SvcState:
    """One service as its manager knows it: the facts `derive_status` reads, and what launch/kill keep."""

    spec: ServiceSpec
    status: ServiceStatus
    proc: WatchRecord | None = None  # the watcher's last record
    health: HealthResult | None = None
    fail_count: int = 0
    fail_since: float | None = None
    ever_ready_pid: int | None = None  # the pid that was ready at least once
    info: ServerInfo | None = None
    info_seen: dict[str, float] = field(default_factory=dict)  # when each of its figures was observed
    info_age: int = 0
    probe_note: str | None = None  # why the last /server_info or /metrics read failed (a body over its cap)
    metrics: LogMetrics | None = None
    metrics_at: float | None = None  # when the `metrics` line was read
    sglang: SglangGauges | None = None  # the server's own /metrics
    sglang_seen: dict[str, float] = field(default_factory=dict)  # when each of its figures was observed
    killing: bool = False
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    pids: list[int] = field(default_factory=list)
    unreachable: str | None = None
    launched_hashes: set[str] = field(default_factory=set)  # argv hashes this manager launched itself

    @property
    def probed(self) -> bool:
        """Whether the prober should ask it now: an external server always, ours while it runs."""
        if self.spec.launcher == "external":
            return True
        return self.proc is not None and self.proc.alive and not self.killing


class ServiceBook:
    """The services of one host profile by name, and the profile as it is now (launch may add a service)."""

    def __init__(self, profile: HostProfile, clock: Callable[[], float] = time.time) -> None:
        self.profile = profile
        self.clock = clock  # stamps when a live value was observed (a log line, a /metrics read, a probe)
        self._svcs: dict[str, SvcState] = {}
        for spec in profile.services:
            self.add(spec)

    @property
    def host(self) -> str:
        return self.profile.name

    def add(self, spec: ServiceSpec) -> SvcState:
        svc = SvcState(spec=spec, status=initial_status(spec, self.profile.name, time.time()))
        self._svcs[spec.name] = svc
        return svc

    def adopt(self, name: str, spec: ServiceSpec) -> SvcState | None:
        """Take `spec` as the service `name`'s; a new service is added (and returned: it needs watching)."""
        if spec.name != name:
            spec = spec.model_copy(update={"name": name})
        if name in self._svcs:
            self._svcs[name].spec = spec
            return None
        svc = self.add(spec)
        self.profile = self.profile.model_copy(update={"service": [*self.profile.service, spec]})
        return svc

    def get(self, name: str) -> SvcState:
        """The service `name`; KeyError (that says which host) when this host has none."""
        svc = self._svcs.get(name)
        if svc is None:
            raise KeyError(f"host '{self.profile.name}' has no service '{name}'")
        return svc

    def find(self, name: str) -> SvcState | None:
        return self._svcs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._svcs

    def __iter__(self) -> Iterator[SvcState]:
        return iter(list(self._svcs.values()))

    def statuses(self) -> list[ServiceStatus]:
        return [s.status for s in self._svcs.values()]

    def service_pids(self) -> dict[int, str]:
        """pid -> service name for every process of our running services (the launcher and its children), and
        for the workers a dead main process left behind (they still hold its GPU memory)."""
        out: dict[int, str] = {}
        for name, svc in self._svcs.items():
            if svc.proc and (svc.proc.alive or svc.proc.orphans):
                main = [svc.proc.pid] if svc.proc.pid is not None else []
                for pid in svc.pids or main:
                    out[pid] = name
        return out

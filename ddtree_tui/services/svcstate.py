"""What a ServiceManager keeps about each service, and the bookkeeping every part of it shares.

The manager is split along its seams (issue 12): this core (services, holds, publishing a status, running a
host program, secrets), `watching` (the watcher stream, health probes, logs), `launching`, `killing`, and
`lifecycle` (ServiceManager itself, restart and move). The status rules live in `status.derive_status`;
here `_recompute` only gathers the facts and publishes what it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ddtree_tui.config import HostProfile, ServiceSpec, redact_text
from ddtree_tui.model.snapshot import ActionResult, ServiceStatus
from ddtree_tui.services.health import HealthResult, ServerInfo
from ddtree_tui.services.launchline import argv_hash, build_launch, host_python, service_paths
from ddtree_tui.services.logs import LogMetrics
from ddtree_tui.services.replies import WatchRecord, last_json_object, parse_reply
from ddtree_tui.services.sglang_metrics import SglangGauges
from ddtree_tui.services.status import Facts, derive_status, initial_status, updated
from ddtree_tui.transport.base import Transport, TransportError

R = TypeVar("R", bound=BaseModel)


class ServiceHeld(Exception):
    """The service is held by someone else (a running sweep)."""


@dataclass
class SvcState:
    """One service as its manager knows it: the facts `derive_status` reads, and its tasks."""

    spec: ServiceSpec
    status: ServiceStatus
    proc: WatchRecord | None = None  # the watcher's last record
    health: HealthResult | None = None
    fail_count: int = 0
    fail_since: float | None = None
    ever_ready_pid: int | None = None  # the pid that was ready at least once
    info: ServerInfo | None = None
    info_age: int = 0
    metrics: LogMetrics | None = None
    sglang: SglangGauges | None = None  # the server's own /metrics
    killing: bool = False
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    subscribers: set[asyncio.Queue[str]] = field(default_factory=set)
    follow_task: asyncio.Task[None] | None = None
    probe_task: asyncio.Task[None] | None = None
    pids: list[int] = field(default_factory=list)
    unreachable: str | None = None
    launched_hashes: set[str] = field(default_factory=set)  # argv hashes this manager launched itself


# the Facts that SvcState keeps under the same name
_FACT_FIELDS = tuple(f.name for f in dataclasses.fields(Facts) if f.name in SvcState.__dataclass_fields__)


@dataclass(frozen=True)
class ManagerOptions:
    """How often and how patiently a manager watches (ServiceManager's keyword arguments)."""

    on_status: Callable[[ServiceStatus], None] | None = None
    on_log: Callable[[str, str], None] | None = None
    on_metrics: Callable[[str, LogMetrics], None] | None = None
    probe_interval: float = 2.0
    health_timeout: float = 5.0
    fail_threshold: int = 2
    follow_lines: int = 40


class ManagerCore:
    """The shared state of one host's service manager (see the module docstring for the parts)."""

    def __init__(self, transport: Transport, profile: HostProfile, opts: ManagerOptions) -> None:
        self.transport = transport
        self.profile = profile
        self.on_status, self.on_log, self.on_metrics = opts.on_status, opts.on_log, opts.on_metrics
        self.probe_interval, self.health_timeout = opts.probe_interval, opts.health_timeout
        self.fail_threshold, self.follow_lines = opts.fail_threshold, opts.follow_lines
        self._svcs: dict[str, SvcState] = {}
        for spec in profile.services:
            self._add(spec)
        self._started = False
        self._watch_task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._forwards: dict[tuple[str, int], int] = {}
        self._changed = asyncio.Event()
        self._python = host_python(profile)
        self._secret_cache: tuple[tuple[int, ...], set[str]] | None = None
        self._holds: dict[str, str] = {}  # service -> who holds it (a sweep): others may not launch/kill it

    # --- holds (a sweep owns the service while it runs) ------------------------------------------------------
    def hold(self, name: str, owner: str) -> None:
        """Reserve `name` for `owner`; ServiceHeld when someone else holds it."""
        self._svc(name)
        cur = self._holds.get(name)
        if cur is not None and cur != owner:
            raise ServiceHeld(f"{self.profile.name}/{name} is held by {cur}")
        self._holds[name] = owner

    def release(self, name: str, owner: str) -> None:
        if self._holds.get(name) == owner:
            del self._holds[name]

    def held_by(self, name: str) -> str | None:
        return self._holds.get(name)

    def _held(self, name: str, verb: str, holder: str | None) -> ActionResult | None:
        owner = self._holds.get(name)
        if owner is None or owner == holder:
            return None
        return ActionResult(
            ok=False,
            message=f"refused to {verb} {self.profile.name}/{name}: it is held by {owner}; nothing was done",
            status=self._svc(name).status,
            suggestion="wait for the sweep to finish, or stop it (it puts the service back as the profile has it)",
        )

    # --- bookkeeping -------------------------------------------------------------------------------------
    def _add(self, spec: ServiceSpec) -> SvcState:
        svc = SvcState(spec=spec, status=initial_status(spec, self.profile.name, time.time()))
        self._svcs[spec.name] = svc
        return svc

    def _svc(self, name: str) -> SvcState:
        svc = self._svcs.get(name)
        if svc is None:
            raise KeyError(f"host '{self.profile.name}' has no service '{name}'")
        return svc

    def spec(self, name: str) -> ServiceSpec:
        return self._svc(name).spec

    def _notify(self) -> None:
        ev, self._changed = self._changed, asyncio.Event()
        ev.set()

    def _publish(self, svc: SvcState, new: ServiceStatus) -> None:
        """Make `new` the service's status and tell the subscribers, when it differs."""
        if new == svc.status:
            return
        svc.status = new
        if self.on_status is not None:
            try:
                self.on_status(new)
            except Exception:  # a subscriber's bug must not stop the watcher
                pass
        self._notify()

    def _set(self, svc: SvcState, **upd: Any) -> None:
        self._publish(svc, updated(svc.status, time.time(), **upd))

    def _recompute(self, svc: SvcState) -> None:
        """The service's status from what is known now (status.derive_status), published."""
        facts = Facts(
            **{k: getattr(svc, k) for k in _FACT_FIELDS},
            last_line=svc.lines[-1] if svc.lines else None,
            fail_threshold=self.fail_threshold,
            redact=self._redact,
        )
        new = derive_status(svc.spec, facts, svc.status, time.time())
        if new.state == "ready" and not svc.unreachable and svc.health is not None and svc.health.ok:
            svc.ever_ready_pid = -1 if svc.spec.launcher == "external" else new.pid
        self._publish(svc, new)

    def statuses(self) -> list[ServiceStatus]:
        return [s.status for s in self._svcs.values()]

    def status(self, name: str) -> ServiceStatus:
        return self._svc(name).status

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

    # --- running helpers on the host -------------------------------------------------------------------
    async def _helper(self, script: str, payload: dict[str, Any], timeout: float, reply: type[R]) -> R:
        """Run a host program with a JSON payload on stdin; its one JSON reply line as `reply`.

        TransportError when the host cannot be reached or the program gives no reply (BadReply, one of
        those, when the reply has the wrong shape)."""
        res = await self.transport.run(
            [self._python, "-I", "-c", script], input=json.dumps(payload), timeout=timeout
        )
        data = last_json_object(res.stdout)
        if data is not None:
            program = getattr(reply, "PROGRAM", reply.__name__)
            return parse_reply(reply, data, f"{program} on {self.profile.name}")
        why = (res.stderr.strip() or res.stdout.strip() or "no output")[-500:]
        if res.timed_out:
            why = f"timed out after {timeout:.0f} s"
        raise TransportError(f"helper on {self.profile.name} failed ({self._python}): {why}")

    def _accept(self, svc: SvcState) -> list[str]:
        """The argv hashes a pidfile's process may show to be ours: the spec's argv now, and what we launched."""
        try:
            now = {argv_hash(build_launch(self.profile, svc.spec).argv)}
        except Exception:  # a spec we do not launch ourselves has no argv of ours
            now = set()
        return sorted(now | svc.launched_hashes)

    def _files(self, svc: SvcState) -> dict[str, Any]:
        """The service's files on the host and the argv hashes it may run: what watch, launch and kill get."""
        p = service_paths(self.profile, svc.spec.name)
        keys = ("workdir", "pidfile", "exitfile", "stopping", "log")
        return {**{k: p[k] for k in keys}, "accept": self._accept(svc)}

    def _secrets(self) -> set[str]:
        """Every secret value of this host's services (cached until a spec changes: used on every log line)."""
        key = (id(self.profile), *(id(s.spec) for s in self._svcs.values()))
        if self._secret_cache is None or self._secret_cache[0] != key:
            out: set[str] = set()
            for svc in self._svcs.values():
                with contextlib.suppress(Exception):
                    out |= build_launch(self.profile, svc.spec).secrets()
            self._secret_cache = (key, out)
        return self._secret_cache[1]

    def _redact(self, text: str) -> str:
        return redact_text(text, self._secrets()) if text else text

    def _redact_lines(self, lines: list[str] | None) -> list[str]:
        secrets = self._secrets()
        return [redact_text(str(x), secrets) for x in lines or []]

    def _watch_cfg(self) -> list[dict[str, Any]]:
        return [{"name": name, **self._files(svc)} for name, svc in self._svcs.items()]

    def _apply_proc(self, name: str, rec: WatchRecord) -> None:
        """Take in a process record (the watcher's, or what launch/kill just did) and recompute."""
        svc = self._svcs.get(name)
        if svc is None:
            return
        prev_pid = svc.proc.pid if svc.proc is not None else None
        svc.proc = rec
        svc.unreachable = None
        if rec.pid != prev_pid:
            svc.health, svc.fail_count, svc.fail_since, svc.info = None, 0, None, None
        if rec.alive:
            svc.pids = list(rec.pids)
            if rec.last and not svc.lines:
                svc.lines.append(self._redact(rec.last[-1]))
        else:
            # a main process that died leaves its workers' pids: still the service's (GPU memory, kill)
            svc.pids = list(rec.orphans)
        self._recompute(svc)

    def _mark_unreachable(self, err: str) -> None:
        for svc in self._svcs.values():
            svc.unreachable = err
            self._recompute(svc)


__all__ = ["ManagerCore", "ManagerOptions", "ServiceHeld", "SvcState"]

"""Launch, kill, restart and move services on one host, and keep their status current.

One ServiceManager a host. Everything reaches the host through its Transport: short helper programs
(`hostscripts`) run with the host's Python for launch and kill; one long-lived watcher stream reports every
service's process state each interval; one `tail -F` stream a service follows its log; HTTP probes go through
the transport's port forward with one kept-alive httpx client. Nothing here kills a process we did not start:
the host-side kill checks the pid's start time and command line against our pidfile first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from ddtree_tui.config import HostProfile, ServiceSpec, redact_text
from ddtree_tui.services import argcheck, hostscripts
from ddtree_tui.services.health import HealthResult, ServerInfo, fetch_server_info, probe_health
from ddtree_tui.services.launchline import argv_hash, build_launch, host_python, service_paths
from ddtree_tui.services.logs import LogMetrics, parse_line
from ddtree_tui.state import ServiceStatus
from ddtree_tui.transport.base import Transport, TransportError

__all__ = ["ActionResult", "LogMetrics", "ServiceManager", "move_service"]


class ServiceHeld(Exception):
    """The service is held by someone else (a running sweep)."""


class ActionResult(BaseModel):
    """The outcome of launch / kill / restart / move, in words a person can act on."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    message: str
    status: ServiceStatus | None = None
    suggestion: str | None = None


@dataclass
class _Svc:
    spec: ServiceSpec
    status: ServiceStatus
    proc: dict[str, Any] | None = None  # the watcher's last record
    health: HealthResult | None = None
    fail_count: int = 0
    fail_since: float | None = None
    ever_ready_pid: int | None = None  # the pid that was ready at least once
    info: ServerInfo | None = None
    info_age: int = 0
    metrics: LogMetrics | None = None
    sglang: Any = None  # SglangGauges from the server's own /metrics (ddtree_tui.services.sglang_metrics)
    killing: bool = False
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    subscribers: set[asyncio.Queue[str]] = field(default_factory=set)
    follow_task: asyncio.Task[None] | None = None
    probe_task: asyncio.Task[None] | None = None
    pids: list[int] = field(default_factory=list)
    unreachable: str | None = None
    launched_hashes: set[str] = field(default_factory=set)  # argv hashes this manager launched itself


# ServiceStatus field -> the LogMetrics field that, when the log has it, wins over the server's /metrics
_LOG_FIELD = {
    "accept_length": "accept_len", "accept_rate": "accept_rate", "gen_throughput": "gen_throughput",
    "running_reqs": "running_req", "queue_reqs": "queue_req", "token_usage": "usage",
}  # fmt: skip

_CLEARED: dict[str, Any] = dict.fromkeys(
    (
        "health_latency_ms",
        "accept_length",
        "accept_rate",
        "gen_throughput",
        "running_reqs",
        "queue_reqs",
        "token_usage",
    ),
)


def _orphan_words(pids: list[int], gpu: Any) -> str:
    """ "2 processes still alive (pids 41240, 41241), 20480 MiB on GPU 1" for workers that outlived main."""
    n = len(pids)
    words = f"{n} process{'es' if n != 1 else ''} still alive (pids {', '.join(map(str, pids[:8]))})"
    per: dict[Any, int] = {}
    for g in gpu or []:
        if isinstance(g, list) and len(g) == 2 and isinstance(g[1], int):
            per[g[0]] = per.get(g[0], 0) + g[1]
    for idx, mib in sorted(per.items(), key=lambda kv: str(kv[0])):
        words += f", {mib} MiB on GPU {idx if idx is not None else '?'}"
    return words + "; kill ends them"


def _exit_words(ex: dict[str, Any] | None) -> str:
    if not ex:
        return "exited, exit status unknown"
    if ex.get("error"):
        return f"could not start: {ex['error']}"
    if ex.get("signal"):
        return f"killed by signal {ex['signal']}"
    if ex.get("exit_code") is not None:
        return f"exited with status {ex['exit_code']}"
    return "exited, exit status unknown"


class ServiceManager:
    """Watches and acts on every service of one host profile."""

    def __init__(
        self,
        transport: Transport,
        profile: HostProfile,
        *,
        on_status: Callable[[ServiceStatus], None] | None = None,
        on_log: Callable[[str, str], None] | None = None,
        on_metrics: Callable[[str, LogMetrics], None] | None = None,
        probe_interval: float = 2.0,
        health_timeout: float = 5.0,
        fail_threshold: int = 2,
        follow_lines: int = 40,
    ) -> None:
        self.transport = transport
        self.profile = profile
        self.on_status = on_status
        self.on_log = on_log
        self.on_metrics = on_metrics
        self.probe_interval = probe_interval
        self.health_timeout = health_timeout
        self.fail_threshold = fail_threshold
        self.follow_lines = follow_lines
        self._svcs: dict[str, _Svc] = {}
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
    def _add(self, spec: ServiceSpec) -> _Svc:
        st = ServiceStatus(
            name=spec.name,
            host=self.profile.name,
            algorithm=spec.algorithm,
            mode=spec.mode
            if spec.algorithm == "ddtree"
            else ("linear" if spec.algorithm == "dflash" else None),
            launcher=spec.launcher,
            simulated=spec.launcher == "sim",
            port=spec.port,
            state="unknown",
            since=time.time(),
            gpus=list(spec.gpus),
        )
        svc = _Svc(spec=spec, status=st)
        self._svcs[spec.name] = svc
        return svc

    def _svc(self, name: str) -> _Svc:
        svc = self._svcs.get(name)
        if svc is None:
            raise KeyError(f"host '{self.profile.name}' has no service '{name}'")
        return svc

    def spec(self, name: str) -> ServiceSpec:
        return self._svc(name).spec

    def _notify(self) -> None:
        ev, self._changed = self._changed, asyncio.Event()
        ev.set()

    def _set(self, svc: _Svc, **upd: Any) -> None:
        old = svc.status
        if "state" in upd and upd["state"] != old.state:
            upd.setdefault("since", time.time())
        new = old.model_copy(update=upd)
        if new == old:
            return
        svc.status = new
        if self.on_status is not None:
            try:
                self.on_status(new)
            except Exception:  # a subscriber's bug must not stop the watcher
                pass
        self._notify()

    def statuses(self) -> list[ServiceStatus]:
        return [s.status for s in self._svcs.values()]

    def status(self, name: str) -> ServiceStatus:
        return self._svc(name).status

    def service_pids(self) -> dict[int, str]:
        """pid -> service name for every process of our running services (the launcher and its children), and
        for the workers a dead main process left behind (they still hold its GPU memory)."""
        out: dict[int, str] = {}
        for name, svc in self._svcs.items():
            if svc.proc and (svc.proc.get("alive") or svc.proc.get("orphans")):
                for pid in svc.pids or [svc.proc.get("pid")]:
                    if isinstance(pid, int):
                        out[pid] = name
        return out

    # --- running helpers on the host -------------------------------------------------------------------
    async def _helper(self, script: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Run a hostscript with a JSON payload on stdin; its one JSON line back. TransportError passes."""
        res = await self.transport.run(
            [self._python, "-I", "-c", script], input=json.dumps(payload), timeout=timeout
        )
        for line in reversed(res.stdout.strip().splitlines()):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
        why = (res.stderr.strip() or res.stdout.strip() or "no output")[-500:]
        if res.timed_out:
            why = f"timed out after {timeout:.0f} s"
        raise TransportError(f"helper on {self.profile.name} failed ({self._python}): {why}")

    def _accept(self, svc: _Svc) -> list[str]:
        """The argv hashes a pidfile's process may show to be ours: the spec's argv now, and what we launched."""
        try:
            now = {argv_hash(build_launch(self.profile, svc.spec).argv)}
        except Exception:  # a spec we do not launch ourselves has no argv of ours
            now = set()
        return sorted(now | svc.launched_hashes)

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
        out: list[dict[str, Any]] = []
        for name, svc in self._svcs.items():
            p = service_paths(self.profile, name)
            out.append(
                {
                    "name": name,
                    "workdir": p["workdir"],
                    "pidfile": p["pidfile"],
                    "exitfile": p["exitfile"],
                    "stopping": p["stopping"],
                    "log": p["log"],
                    "accept": self._accept(svc),
                }
            )
        return out

    # --- status --------------------------------------------------------------------------------------------
    def _apply_proc(self, name: str, rec: dict[str, Any]) -> None:
        svc = self._svcs.get(name)
        if svc is None:
            return
        prev_pid = (svc.proc or {}).get("pid")
        svc.proc = rec
        svc.unreachable = None
        if rec.get("pid") != prev_pid:
            svc.health, svc.fail_count, svc.fail_since, svc.info = None, 0, None, None
        if rec.get("alive"):
            svc.pids = [p for p in rec.get("pids") or [] if isinstance(p, int)]
            last = rec.get("last") or []
            if last and not svc.lines:
                svc.lines.append(self._redact(str(last[-1])))
        else:
            # a main process that died leaves its workers' pids: still the service's (GPU memory, kill)
            svc.pids = [p for p in rec.get("orphans") or [] if isinstance(p, int)]
        self._recompute(svc)

    def _recompute(self, svc: _Svc) -> None:
        now = time.time()
        rec = svc.proc
        spec = svc.spec
        if svc.unreachable:
            self._set(svc, state="unknown", detail=f"host unreachable: {svc.unreachable}")
            return
        if spec.launcher == "external":
            self._recompute_external(svc)
            return
        if rec is None:
            return
        if rec.get("untrusted"):
            self._set(svc, state="unknown", pid=None, detail=f"workdir not trusted: {rec['untrusted']}")
            return
        if not rec.get("present"):
            self._set(svc, state="stopped", pid=None, detail=None, port=spec.port, **_CLEARED)
            return
        pid = rec.get("pid")
        started = rec.get("started_at")
        if not rec.get("alive"):
            if rec.get("stopping") or svc.killing:
                self._set(svc, state="stopped", pid=None, detail="stopping", port=spec.port)
                return
            why = rec.get("why")
            if why in ("pid-reused", "foreign"):
                detail = f"process gone; pid {pid} now belongs to another process ({rec.get('other_cmd')})"
            else:
                detail = _exit_words(rec.get("exit"))
            orphans = [p for p in rec.get("orphans") or [] if isinstance(p, int)]
            if orphans:
                detail = f"degraded: main pid {pid} {detail}, " + _orphan_words(
                    orphans, rec.get("orphan_gpu")
                )
            self._set(
                svc,
                state="crashed",
                pid=pid,
                started_at=started,
                detail=self._redact(detail),
                last_log=self._redact_lines(rec.get("tail")),
                port=spec.port,
                health_latency_ms=None,  # a dead process has no health latency (it kept the last one)
            )
            return
        m = svc.metrics
        info = svc.info
        upd: dict[str, Any] = {"pid": pid, "started_at": started, "port": self._running_port(svc)}
        moved = upd["port"] != spec.port
        port_note = (
            f"running on port {upd['port']}; the profile says {spec.port}: restart to apply"
            if moved
            else None
        )
        if info is not None:
            upd["version"] = info.version
            upd["model"] = info.model_path
            if m is None or m.accept_len is None:
                upd["accept_length"] = info.avg_spec_accept_length
            if m is None or m.gen_throughput is None:
                upd["gen_throughput"] = info.last_gen_throughput
        sg = svc.sglang  # the server's own gauges: between its log lines and /server_info
        if sg is not None:
            for key, val in (("accept_length", sg.accept_length), ("accept_rate", sg.accept_rate),
                             ("gen_throughput", sg.gen_throughput), ("running_reqs", sg.running_reqs),
                             ("queue_reqs", sg.queue_reqs), ("token_usage", sg.token_usage)):  # fmt: skip
                if val is not None and (m is None or getattr(m, _LOG_FIELD[key], None) is None):
                    upd[key] = val
        h = svc.health
        if h is not None:
            upd["health_latency_ms"] = round(h.latency_ms, 2) if h.latency_ms is not None else None
        last_line = svc.lines[-1] if svc.lines else None
        if h is not None and h.ok:
            svc.ever_ready_pid = pid
            self._set(svc, state="ready", detail=port_note, **upd)
        elif svc.ever_ready_pid == pid and svc.fail_count >= self.fail_threshold:
            since = svc.fail_since or now
            why = h.error if h else "no answer"
            self._set(
                svc,
                state="unhealthy",
                detail=f"{why} (since {time.strftime('%H:%M:%S', time.localtime(since))})",
                **upd,
            )
            if svc.status.since != since:
                self._set(svc, since=since)
        elif svc.ever_ready_pid == pid:
            self._set(svc, **upd)  # a single failed probe: keep ready, try again
        elif started and now - float(started) > spec.startup_timeout:
            why = h.error if h else "no answer"
            self._set(
                svc, state="unhealthy", detail=f"not ready after {spec.startup_timeout:.0f} s: {why}", **upd
            )
        else:
            self._set(svc, state="starting", detail=last_line, **upd)

    def _recompute_external(self, svc: _Svc) -> None:
        """A server ddtree-tui did not start: its state is what /health says, never read from a pidfile."""
        h, info = svc.health, svc.info
        upd: dict[str, Any] = {"pid": None}
        if info is not None:
            upd.update(version=info.version, model=info.model_path)
            m = svc.metrics
            if m is None or m.accept_len is None:
                upd["accept_length"] = info.avg_spec_accept_length
            if m is None or m.gen_throughput is None:
                upd["gen_throughput"] = info.last_gen_throughput
        if h is None:
            self._set(svc, state="unknown", detail="external: not probed yet", **upd)
            return
        upd["health_latency_ms"] = round(h.latency_ms, 2) if h.latency_ms is not None else None
        if h.ok:
            self._set(svc, state="ready", detail="external", **upd)
        elif h.status_code is not None:
            # it answers but is not serving (503 while it loads or shuts down)
            self._set(
                svc,
                state="starting" if svc.ever_ready_pid is None else "unhealthy",
                detail=f"external: {h.error}",
                **upd,
            )
        else:
            self._set(svc, state="unhealthy", detail=f"external: not answering ({h.error})", **upd)
        if h.ok:
            svc.ever_ready_pid = -1

    def _mark_unreachable(self, err: str) -> None:
        for svc in self._svcs.values():
            svc.unreachable = err
            self._recompute(svc)

    async def refresh(self) -> None:
        """One status pass now (process states, then a health probe of the live ones)."""
        try:
            res = await self.transport.run(
                [self._python, "-I", "-c", hostscripts.WATCH, "0", json.dumps(self._watch_cfg()), "once"],
                timeout=20,
            )
        except TransportError as e:
            self._mark_unreachable(str(e))
            return
        data = self._parse_watch(res.stdout)
        if data is None:
            self._mark_unreachable(f"status helper failed: {(res.stderr or res.stdout).strip()[-300:]}")
            return
        for name, rec in data.items():
            self._apply_proc(name, rec)
        await asyncio.gather(
            *(
                self._probe(s)
                for s in self._svcs.values()
                if s.spec.launcher == "external" or (s.proc and s.proc.get("alive"))
            )
        )

    @staticmethod
    def _parse_watch(text: str) -> dict[str, Any] | None:
        for line in reversed(text.strip().splitlines()):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(data.get("services"), dict):
                return data["services"]
        return None

    async def _watch_loop(self) -> None:
        """The watcher stream: one JSON line per interval; restarted with backoff when it breaks."""
        backoff = self.probe_interval
        while True:
            err = "watcher ended"
            agen = self.transport.stream(
                [
                    self._python,
                    "-I",
                    "-c",
                    hostscripts.WATCH,
                    str(self.probe_interval),
                    json.dumps(self._watch_cfg()),
                ],
                stderr=True,
            )
            stale_after = max(3 * self.probe_interval, 10.0)
            tail_err: deque[str] = deque(maxlen=5)
            try:
                while True:
                    try:
                        # asyncio.timeout, never wait_for: on Python 3.11 wait_for returns a result that
                        # races a cancel and drops the cancel, and stop() would then wait on this loop forever
                        async with asyncio.timeout(stale_after):
                            line = await anext(agen)
                    except StopAsyncIteration:
                        if tail_err:
                            err = "watcher: " + " | ".join(tail_err)
                        break
                    except TimeoutError:
                        err = f"no status from host for {stale_after:.0f} s"
                        break
                    data = self._parse_watch(line)
                    if data is None:
                        tail_err.append(line[-200:])
                        continue
                    backoff = self.probe_interval
                    for name, rec in data.items():
                        self._apply_proc(name, rec)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # TransportError or the connection dropping under us
                err = str(e) or type(e).__name__
            finally:
                with contextlib.suppress(Exception):
                    await agen.aclose()
            self._mark_unreachable(err)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 15.0)

    # --- health --------------------------------------------------------------------------------------------
    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                trust_env=False, limits=httpx.Limits(max_keepalive_connections=8, keepalive_expiry=30)
            )
        return self._client

    @staticmethod
    def _running_port(svc: _Svc) -> int:
        """The port the running process was launched on (its pidfile), else the spec's: after a profile
        edit + reload the process still serves on the old port until it is restarted."""
        rec = svc.proc or {}
        port = rec.get("port")
        return port if rec.get("alive") and isinstance(port, int) and port > 0 else svc.spec.port

    async def base_url(self, name: str) -> str:
        """http://127.0.0.1:<local port> reaching the service's port on its host."""
        svc = self._svc(name)
        spec = svc.spec
        port = self._running_port(svc)
        remote = "127.0.0.1" if spec.bind in ("0.0.0.0", "", "::") else spec.bind
        key = (remote, port)
        if key not in self._forwards:
            self._forwards[key] = await self.transport.forward_port(port, remote)
        host = remote if self.profile.is_local and remote not in ("::1",) else "127.0.0.1"
        return f"http://{host}:{self._forwards[key]}"

    async def _probe(self, svc: _Svc) -> None:
        """One probe of one service; callers never run two at once for the same service."""
        try:
            base = await self.base_url(svc.spec.name)
        except Exception as e:
            h = HealthResult(ok=False, error=f"port forward failed: {e}", ts=time.time())
        else:
            h = await probe_health(self._http(), base, self.health_timeout)
            if h.ok and (svc.info is None or svc.info_age >= 5):
                info = await fetch_server_info(self._http(), base, self.health_timeout, svc.info is None)
                if info is not None:
                    if svc.info is not None and info.model_path is None:
                        info = info.model_copy(update={"model_path": svc.info.model_path})
                    svc.info = info
                svc.info_age = 0
                if h.ok and svc.spec.enable_metrics:
                    from ddtree_tui.services.sglang_metrics import fetch_sglang_metrics

                    svc.sglang = await fetch_sglang_metrics(self._http(), base, self.health_timeout)
            svc.info_age += 1
        svc.health = h
        if h.ok:
            svc.fail_count, svc.fail_since = 0, None
        else:
            svc.fail_count += 1
            svc.fail_since = svc.fail_since or h.ts
        self._recompute(svc)

    async def _probe_loop(self, svc: _Svc) -> None:
        while True:
            external = svc.spec.launcher == "external"
            if external or (svc.proc and svc.proc.get("alive") and not svc.killing):
                with contextlib.suppress(Exception):
                    await self._probe(svc)
            await asyncio.sleep(self.probe_interval)

    # --- logs ------------------------------------------------------------------------------------------------
    def _on_line(self, svc: _Svc, line: str) -> None:
        line = self._redact(line)  # SGLang prints its server_args, --api-key included
        svc.lines.append(line)
        if self.on_log is not None:
            with contextlib.suppress(Exception):
                self.on_log(svc.spec.name, line)
        for q in list(svc.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(line)
        m = parse_line(line)
        if m is not None and svc.proc is not None and svc.proc.get("alive"):
            svc.metrics = m
            upd: dict[str, Any] = {}
            if m.kind == "decode":
                upd.update(
                    accept_length=m.accept_len, accept_rate=m.accept_rate, gen_throughput=m.gen_throughput
                )
            upd.update(running_reqs=m.running_req, queue_reqs=m.queue_req, token_usage=m.usage)
            self._set(svc, **{k: v for k, v in upd.items() if v is not None})
            if self.on_metrics is not None:
                with contextlib.suppress(Exception):
                    self.on_metrics(svc.spec.name, m)
        elif svc.status.state == "starting" and line.strip():
            self._set(svc, detail=line)

    async def _follow_loop(self, svc: _Svc) -> None:
        log = service_paths(self.profile, svc.spec.name)["log"]
        n = self.follow_lines
        while True:
            try:
                async for line in self.transport.stream(["tail", "-n", str(n), "-F", log]):
                    self._on_line(svc, line)
            except asyncio.CancelledError:
                raise
            except Exception:
                pass
            n = 0  # after a reconnect, only new lines
            await asyncio.sleep(max(self.probe_interval, 1.0))

    async def read_log(self, name: str, lines: int = 40) -> list[str]:
        """The last lines of a service's log (empty when it has none yet)."""
        log = service_paths(self.profile, self._svc(name).spec.name)["log"]
        res = await self.transport.run(
            [self._python, "-I", "-c", hostscripts.READ_LOG, log, str(lines)], timeout=20
        )
        try:
            out = json.loads(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise TransportError(f"cannot read {log}: {res.stderr.strip()[-300:]}") from None
        return self._redact_lines([str(x) for x in out])

    async def follow_log(
        self, name: str, on_gap: Callable[[str], None] | None = None, retry_s: float = 1.0
    ) -> AsyncIterator[str]:
        """New lines of a service's log as they come: shares the manager's follower when it runs, else opens
        its own `tail -F` (which keeps following across a restart's log rotation). A dropped connection
        does not end it: it waits for the reconnect and follows on (`on_gap` hears about the gap)."""
        svc = self._svc(name)
        if svc.follow_task is not None and not svc.follow_task.done():
            q: asyncio.Queue[str] = asyncio.Queue(maxsize=10000)
            svc.subscribers.add(q)
            try:
                while True:
                    yield await q.get()
            finally:
                svc.subscribers.discard(q)
        else:
            log = service_paths(self.profile, name)["log"]
            while True:
                why = "the log stream ended"
                try:
                    async for line in self.transport.stream(["tail", "-n", "0", "-F", log]):
                        yield self._redact(line)
                except TransportError as e:
                    why = str(e) or why
                # `tail -F` never ends by itself: the connection dropped (or tail was killed)
                if on_gap is not None:
                    on_gap(f"{self.profile.name}: {why}; following again once the host is back")
                await asyncio.sleep(retry_s)
                while not await self.transport.wait_connected(30):
                    pass
                if on_gap is not None:
                    on_gap(
                        f"{self.profile.name}: reconnected; lines written meanwhile are not shown (logs -n N)"
                    )

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Watch every service: one watcher stream, a log follower and a health prober a service."""
        if self._started:
            return
        self._started = True
        self._watch_task = asyncio.create_task(self._watch_loop(), name=f"watch-{self.profile.name}")
        for svc in self._svcs.values():
            self._start_svc_tasks(svc)

    def _start_svc_tasks(self, svc: _Svc) -> None:
        n = f"{self.profile.name}/{svc.spec.name}"
        svc.follow_task = asyncio.create_task(self._follow_loop(svc), name=f"follow-{n}")
        svc.probe_task = asyncio.create_task(self._probe_loop(svc), name=f"probe-{n}")

    async def stop(self) -> None:
        """Stop watching; services keep running."""
        tasks: list[asyncio.Task[None]] = []
        if self._watch_task is not None:
            tasks.append(self._watch_task)
            self._watch_task = None
        for svc in self._svcs.values():
            for t in (svc.follow_task, svc.probe_task):
                if t is not None:
                    tasks.append(t)
            svc.follow_task = svc.probe_task = None
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._started = False
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _restart_watcher(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch_task
            self._watch_task = asyncio.create_task(self._watch_loop(), name=f"watch-{self.profile.name}")

    async def wait_state(self, name: str, states: set[str], timeout: float) -> ServiceStatus:
        """Wait until the service is in one of `states`; returns its status then, or the current status when
        the timeout passes first (check `.state`). Polls by itself when start() was not called."""
        svc = self._svc(name)
        deadline = time.monotonic() + timeout
        while True:
            if svc.status.state in states:
                return svc.status
            left = deadline - time.monotonic()
            if left <= 0:
                return svc.status
            if self._started:
                ev = self._changed
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await ev.wait()
            else:
                await self.refresh()
                if svc.status.state in states:
                    return svc.status
                await asyncio.sleep(min(self.probe_interval, max(0.0, deadline - time.monotonic())))

    async def launch(
        self, name: str, spec: ServiceSpec | None = None, *, force: bool = False, holder: str | None = None
    ) -> ActionResult:
        """Start the service detached on the host; refused when it already runs, its port is taken, the
        host's own SGLang parser rejects the command line (`force` launches anyway), or someone other than
        `holder` holds it (a sweep)."""
        held = self._held(name, "launch", holder) if name in self._svcs else None
        if held is not None:
            return held
        if spec is not None:
            if spec.name != name:
                spec = spec.model_copy(update={"name": name})
            if name in self._svcs:
                self._svcs[name].spec = spec
            else:
                svc = self._add(spec)
                self.profile = self.profile.model_copy(update={"service": [*self.profile.service, spec]})
                if self._started:
                    self._start_svc_tasks(svc)
                    await self._restart_watcher()
        svc = self._svc(name)
        spec = svc.spec
        if spec.launcher == "external":
            return ActionResult(
                ok=False,
                message=f"{self.profile.name}/{name} is external: ddtree-tui did not start it and does not launch it",
                status=svc.status,
            )
        cmd = build_launch(self.profile, spec)
        check = await argcheck.preflight(self.transport, self.profile, spec, cmd)
        if check is not None and check.ok is False and not force:
            msg, sugg = argcheck.refusal(f"{self.profile.name}/{name}", check)
            return ActionResult(ok=False, message=msg, status=svc.status, suggestion=sugg)
        p = service_paths(self.profile, name)
        payload = {
            "workdir": p["workdir"],
            "argv": cmd.argv,
            "display_argv": cmd.display_argv(),
            "accept": self._accept(svc),
            "env": cmd.env,
            "cwd": cmd.cwd,
            "log": cmd.log_path,
            "pidfile": cmd.pidfile_path,
            "exitfile": cmd.exitfile_path,
            "stopping": p["stopping"],
            "lockfile": p["lockfile"],
            "port": spec.port,
            "bind": spec.bind,
            "name": name,
            "wrapper": hostscripts.WRAPPER,
            "avoid_ports": [s.spec.port for s in self._svcs.values()],
        }
        host = self.profile.name
        try:
            r = await self._helper(hostscripts.LAUNCH, payload, timeout=40)
        except TransportError as e:
            return ActionResult(
                ok=False,
                message=f"cannot launch {host}/{name}: {e}",
                status=svc.status,
                suggestion="check the host connection (ddtree-tui doctor)",
            )
        if not r.get("ok"):
            reason = r.get("reason")
            if reason == "workdir":
                return ActionResult(
                    ok=False,
                    message=f"refused to launch {host}/{name}: {r.get('why')}",
                    status=svc.status,
                    suggestion=f"fix the workdir on {host}, or set another workdir in "
                    f"{self.profile.source or 'the profile'}",
                )
            if reason == "busy":
                return ActionResult(
                    ok=False,
                    message=f"another launch of {host}/{name} is still in progress on {host}; nothing was started",
                    status=svc.status,
                    suggestion="wait for it, then look at the status",
                )
            if reason == "degraded":
                pids = ", ".join(str(x) for x in r.get("pids") or [])
                await self._refresh_if_idle()
                return ActionResult(
                    ok=False,
                    message=f"{host}/{name} is degraded: its main process {r.get('pid')} exited but its "
                    f"processes {pids} still run; nothing was launched",
                    status=svc.status,
                    suggestion=f"kill {host}/{name} first (it ends them), then launch",
                )
            if reason == "space":
                return ActionResult(
                    ok=False,
                    message=f"refused to launch {host}/{name}: {r.get('why')}",
                    status=svc.status,
                    suggestion="free some space on that disk",
                )
            if reason == "running":
                since = r.get("started_at")
                when = time.strftime(" since %H:%M:%S", time.localtime(since)) if since else ""
                await self._refresh_if_idle()
                return ActionResult(
                    ok=False,
                    message=f"{host}/{name} is already running (pid {r.get('pid')}{when})",
                    status=svc.status,
                    suggestion="restart it, or kill it first",
                )
            if reason == "port":
                # the port's owner (not the sweep `holder` of this launch)
                owner: dict[str, Any] = r.get("holder") or {}  # type: ignore[assignment]
                if owner.get("pid"):
                    who = f"pid {owner['pid']} ({owner.get('cmd') or '?'})"
                elif owner:
                    who = "a process of another user (not visible)"
                else:
                    who = "another socket"
                nxt = r.get("next_free")
                sugg = (
                    f"set port = {nxt} for {name} in {self.profile.source or 'the profile'}" if nxt else None
                )
                return ActionResult(
                    ok=False,
                    message=f"port {spec.port} on {host} is already in use by {who}",
                    status=svc.status,
                    suggestion=sugg,
                )
            tail = self._redact_lines(r.get("tail"))
            if reason == "exec":
                msg = f"{host}/{name} did not start: {_exit_words(r.get('exit'))}"
            else:
                msg = f"{host}/{name}: the launcher did not report a pid within 15 s"
            self._set(svc, last_log=list(tail))
            return ActionResult(
                ok=False, message=msg, status=svc.status, suggestion=(tail[-1] if tail else None)
            )
        rec = r.get("record") or {}
        svc.launched_hashes.add(cmd.argv_hash())
        svc.lines.clear()
        svc.metrics = None
        svc.ever_ready_pid = None
        svc.killing = False
        self._apply_proc(
            name,
            {
                "present": True,
                "alive": True,
                "pid": rec.get("pid"),
                "pgid": rec.get("pgid"),
                "started_at": rec.get("started_at"),
                "pids": [rec.get("pid")],
            },
        )
        self._set(svc, last_log=[], accept_length=None, accept_rate=None, gen_throughput=None)
        msg = f"launched {host}/{name} (pid {rec.get('pid')}, port {spec.port})"
        if check is not None and check.ok is False:
            msg += f"; forced past the check: {'; '.join(check.problems)}"
        elif check is not None and check.ok is None:
            msg += f"; {check.summary()}"
        if r.get("stale"):
            msg += f"; removed a stale pidfile (pid {r['stale'].get('pid')}: {r['stale'].get('why')})"
        return ActionResult(ok=True, message=msg, status=svc.status)

    async def _refresh_if_idle(self) -> None:
        if not self._started:
            await self.refresh()

    async def kill(
        self, name: str, timeout: float | None = None, *, holder: str | None = None
    ) -> ActionResult:
        """SIGTERM the service's process group, SIGKILL after the timeout; only if the pid is still ours."""
        svc = self._svc(name)
        held = self._held(name, "kill", holder)
        if held is not None:
            return held
        if svc.spec.launcher == "external":
            return ActionResult(
                ok=False,
                message=f"{self.profile.name}/{name} is external: ddtree-tui did not start it and does not stop it",
                status=svc.status,
            )
        t = float(timeout if timeout is not None else svc.spec.kill_timeout)
        p = service_paths(self.profile, name)
        host = self.profile.name
        svc.killing = True
        try:
            r = await self._helper(
                hostscripts.KILL,
                {
                    "workdir": p["workdir"],
                    "pidfile": p["pidfile"],
                    "exitfile": p["exitfile"],
                    "stopping": p["stopping"],
                    "log": p["log"],
                    "accept": self._accept(svc),
                    "timeout": t,
                },
                timeout=t + 30,
            )
        except TransportError as e:
            svc.killing = False
            return ActionResult(
                ok=False,
                message=f"cannot kill {host}/{name}: {e}",
                status=svc.status,
                suggestion="check the host connection",
            )
        result = r.get("result")
        pid = r.get("pid")
        if result in ("terminated", "killed", "not-running", "stale", "group-ended"):
            self._apply_proc(name, {"present": False})
        svc.killing = False
        if not self._started:
            await self.refresh()
        ended = [x for x in r.get("ended") or [] if isinstance(x, int)]
        others = ""
        if ended and result in ("terminated", "killed"):
            others = f" and {len(ended)} other process{'es' if len(ended) != 1 else ''} of its group"
        if result == "untrusted":
            return ActionResult(
                ok=False,
                status=svc.status,
                message=f"refused to signal anything for {host}/{name}: {r.get('why')}",
                suggestion=f"fix the workdir on {host}; its pidfile cannot be believed until then",
            )
        if result == "terminated":
            return ActionResult(
                ok=True,
                message=f"stopped {host}/{name} (pid {pid}{others}, SIGTERM, {r.get('waited')} s)",
                status=svc.status,
            )
        if result == "killed":
            return ActionResult(
                ok=True,
                status=svc.status,
                message=f"killed {host}/{name} (pid {pid}{others}): it ignored SIGTERM for {t:.0f} s, sent SIGKILL",
            )
        if result == "group-ended":
            how = "SIGTERM" if r.get("how") == "terminated" else "SIGKILL after SIGTERM"
            pids = ", ".join(str(x) for x in ended)
            return ActionResult(
                ok=True,
                status=svc.status,
                message=f"{host}/{name}: main pid {pid} had already {_exit_words(r.get('exit'))}; ended "
                f"{len(ended)} process{'es' if len(ended) != 1 else ''} of its group still running "
                f"(pids {pids}, {how})",
            )
        if result == "not-running":
            return ActionResult(ok=True, message=f"{host}/{name} is not running", status=svc.status)
        if result == "stale":
            return ActionResult(
                ok=True,
                status=svc.status,
                message=f"{host}/{name} was not running ({_exit_words(r.get('exit'))}); removed its stale pidfile",
            )
        if result in ("pid-reused", "foreign"):
            what = (
                "was reused by another process"
                if result == "pid-reused"
                else "runs a command we did not start"
            )
            self._apply_proc(name, {"present": False})
            return ActionResult(
                ok=False,
                status=svc.status,
                message=f"refused to signal pid {pid} on {host}: it {what} ({r.get('cmd') or '?'}); "
                "our service is gone, its stale pidfile was removed",
                suggestion="check the host's processes yourself; nothing was signalled",
            )
        return ActionResult(
            ok=False,
            message=f"{host}/{name} (pid {pid}) survived SIGKILL",
            status=svc.status,
            suggestion="the process may be stuck in the kernel (D state); check the host",
        )

    async def restart(self, name: str, *, force: bool = False, holder: str | None = None) -> ActionResult:
        """Kill (if running) then launch with the same spec."""
        k = await self.kill(name, holder=holder)
        if not k.ok:
            return k
        r = await self.launch(name, force=force, holder=holder)
        if r.ok:
            return r.model_copy(update={"message": f"{k.message}; {r.message}"})
        return r


async def move_service(src: ServiceManager, dst: ServiceManager, name: str) -> ActionResult:
    """Launch src's spec of `name` on dst (added there if absent), wait until ready, then kill it on src.

    The answer to a host that lost its GPU: the old one is killed only once the new one serves, and a
    source host that cannot be reached does not block the move (the result says so).
    """
    spec = src.spec(name)
    held = src._held(name, "move", None)
    if held is not None:
        return held
    own = dst._svcs.get(name)
    if own is not None and own.spec != spec:  # launch would overwrite dst's own service of that name
        return ActionResult(
            ok=False,
            status=own.status,
            message=f"{dst.profile.name} already has a different service named '{name}' "
            f"(port {own.spec.port}); nothing was launched",
            suggestion="rename one of them in its profile, or move to another host",
        )
    r = await dst.launch(name, spec)
    if not r.ok:
        return r
    st = await dst.wait_state(name, {"ready", "crashed", "unhealthy"}, spec.startup_timeout)
    if st.state != "ready":
        return ActionResult(
            ok=False,
            status=st,
            message=f"{dst.profile.name}/{name} did not become ready ({st.state}: {st.detail}); "
            f"{src.profile.name}/{name} left as it was",
        )
    k = await src.kill(name)
    msg = f"moved {name} from {src.profile.name} to {dst.profile.name} (pid {st.pid}); {k.message}"
    sugg = None if k.ok else f"the old one on {src.profile.name} was not stopped: {k.suggestion or k.message}"
    return ActionResult(ok=True, message=msg, status=st, suggestion=sugg)

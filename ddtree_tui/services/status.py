"""A service's status from what is known about it: one pure function, `derive_status`.

Everything the manager learns (the watcher's process record, the last health probe, /server_info, the
server's own /metrics, the last parsed log line, whether our kill is under way, whether the host answers)
goes in as `Facts`; the new ServiceStatus comes out. No I/O, no clock (the caller passes `now`), no state
kept here: ServiceManager only gathers facts and publishes what this returns, so every state rule can be
tested as one table row (tests/unit/test_service_status.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ddtree_tui.config import ServiceSpec
from ddtree_tui.model.snapshot import ServiceStatus
from ddtree_tui.services.health import HealthResult, ServerInfo
from ddtree_tui.services.logs import LogMetrics
from ddtree_tui.services.replies import ExitInfo, WatchRecord
from ddtree_tui.services.sglang_metrics import SglangGauges

__all__ = [
    "Facts",
    "derive_status",
    "exit_words",
    "initial_status",
    "running_port",
    "updated",
]

# ServiceStatus field -> the LogMetrics field that, when the log has it, wins over the server's /metrics
_LOG_FIELD = {
    "accept_length": "accept_len", "accept_rate": "accept_rate", "gen_throughput": "gen_throughput",
    "running_reqs": "running_req", "queue_reqs": "queue_req", "token_usage": "usage",
}  # fmt: skip

_CLEARED: dict[str, Any] = dict.fromkeys(
    ("health_latency_ms", "accept_length", "accept_rate", "gen_throughput", "running_reqs", "queue_reqs",
     "token_usage"),
)  # fmt: skip
# figures the server computes at its own decode log line and then keeps: one that reads the same as last time
# is the server's last figure, observed when it last changed (an idle server's gen_throughput stays put)
_RATES = ("accept_length", "accept_rate", "gen_throughput")


# /server_info figures that are another figure than the status field's other sources: its
# avg_spec_accept_length averages the server's whole life (SGLang's scheduler divides its cumulative accepted
# tokens by its cumulative verify passes), the log line and /metrics' spec_accept_length the last decode
# window. Shown only where neither of those has one.
_LIFETIME = ("accept_length",)


def _same(text: str) -> str:
    return text


@dataclass(frozen=True)
class Facts:
    """What the manager knows about one service at one instant (inputs of `derive_status`)."""

    proc: WatchRecord | None = None  # the watcher's last record; None: not seen yet
    health: HealthResult | None = None  # the last probe of the current pid
    info: ServerInfo | None = None
    probe_note: str | None = None  # why the last /server_info or /metrics read failed (a body over its cap)
    sglang: SglangGauges | None = None  # the server's own /metrics
    info_seen: dict[str, float] = field(default_factory=dict)  # status field -> when `info` observed it
    sglang_seen: dict[str, float] = field(default_factory=dict)  # status field -> when `sglang` observed it
    metrics: LogMetrics | None = None  # the last parsed log line
    metrics_at: float | None = None  # when that line was read
    last_line: str | None = None  # the last log line (the detail while starting)
    killing: bool = False  # our kill of it is under way
    unreachable: str | None = None  # why the host does not answer, while it does not
    ever_ready_pid: int | None = None  # the pid that was ready at least once (-1: an external server)
    fail_count: int = 0  # failed probes in a row
    fail_since: float | None = None  # when the failures began
    fail_threshold: int = 2  # failed probes in a row that make a ready service unhealthy
    redact: Callable[[str], str] = field(default=_same)  # masks secrets in text from the host


def initial_status(spec: ServiceSpec, host: str, now: float) -> ServiceStatus:
    """The status of a service nothing is known about yet."""
    return ServiceStatus(
        name=spec.name,
        host=host,
        algorithm=spec.algorithm,
        mode=spec.mode if spec.algorithm == "ddtree" else ("linear" if spec.algorithm == "dflash" else None),
        launcher=spec.launcher,
        simulated=spec.launcher == "sim",
        port=spec.port,
        state="unknown",
        since=now,
        gpus=list(spec.gpus),
    )


def _orphan_words(pids: list[int], gpu: list[Any]) -> str:
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


def exit_words(ex: ExitInfo | None) -> str:
    """How a process ended, from its exit file, in words."""
    if ex is None:
        return "exited, exit status unknown"
    if ex.error:
        return f"could not start: {ex.error}"
    if ex.signal:
        return f"killed by signal {ex.signal}"
    if ex.exit_code is not None:
        return f"exited with status {ex.exit_code}"
    return "exited, exit status unknown"


def running_port(spec: ServiceSpec, proc: WatchRecord | None) -> int:
    """The port the running process was launched on (its pidfile), else the spec's: after a profile
    edit + reload the process still serves on the old port until it is restarted."""
    if proc is not None and proc.alive and proc.port is not None and proc.port > 0:
        return proc.port
    return spec.port


def updated(previous: ServiceStatus, now: float, **upd: object) -> ServiceStatus:
    """previous with `upd`; a change of state moves `since` to now unless `upd` says when."""
    if "state" in upd and upd["state"] != previous.state:
        upd.setdefault("since", now)
    return previous.model_copy(update=upd)


def observed_times(
    before: dict[str, float],
    old: Mapping[str, object],
    new: Mapping[str, object],
    now: float,
    shown: ServiceStatus | None = None,
) -> dict[str, float]:
    """When each figure of a server read (`new`, by status field) was observed: `now`, except a figure the
    server keeps between its decode lines (`_RATES`) that reads as it did in the last read of this source
    (`old`: as `before` says), or as the status already shows it from another source (`shown`: the log's
    decode line, or /server_info beside /metrics: as its `observed_at` says); the earlier of the two. A
    source read less often than the log (every fifth probe) otherwise sees the last decode's figure "change"
    long after the log reported it, and an idle server's last figure looks fresh. The caller keeps what this
    returns as the next `before`."""
    out: dict[str, float] = {}
    for key, value in new.items():
        if value is None:
            continue
        seen = [now]
        if key in _RATES:
            if key in before and _same_figure(old.get(key), value):
                seen.append(before[key])
            if shown is not None and key in shown.observed_at and _same_figure(getattr(shown, key), value):
                seen.append(shown.observed_at[key])
        out[key] = min(seen)
    return out


def _same_figure(a: object, b: object) -> bool:
    """The same kept figure read twice: /server_info prints it to 2 decimals and /metrics to 3 (SGLang's
    and the simulator's), so equal up to that rounding is the same figure, not a new one."""
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= 0.006 + 1e-9 * abs(b)
    return a == b


def info_figures(info: ServerInfo | None) -> dict[str, float | None]:
    """/server_info's live figures by status field."""
    if info is None:
        return {}
    return {"accept_length": info.avg_spec_accept_length, "gen_throughput": info.last_gen_throughput}


def gauge_figures(sg: SglangGauges | None) -> dict[str, float | None]:
    """/metrics' live figures by status field."""
    return {} if sg is None else {key: getattr(sg, key, None) for key in _LOG_FIELD}


def _log_has(f: Facts, key: str) -> bool:
    """Whether the last parsed log line has the status field `key`."""
    return f.metrics is not None and getattr(f.metrics, _LOG_FIELD[key], None) is not None


def _from_server(
    f: Facts, upd: dict[str, Any], stamps: dict[str, float], key: str, value: float | None, at: float | None
) -> None:
    """A figure read from the server (/server_info or /metrics, observed at `at`) into `upd` with that time,
    unless the log's figure is at least as fresh (the log reports each decode step window; it wins a tie)."""
    log_has = _log_has(f, key)
    if value is None:
        if not log_has:
            upd[key] = None
            stamps.pop(key, None)
        return
    if log_has and (f.metrics_at is None or at is None or f.metrics_at >= at):
        return  # the log's figure is as fresh (or nobody knows which is fresher): it stays
    upd[key] = value
    if at is not None:
        stamps[key] = at


def _server_numbers(f: Facts, upd: dict[str, Any], stamps: dict[str, float]) -> None:
    """Version, model and speed numbers from /server_info and /metrics, where the log has none as fresh."""
    info = f.info
    if info is not None:
        upd["version"] = info.version
        upd["model"] = info.model_path
        for key, value in info_figures(info).items():
            if key in _LIFETIME and (_log_has(f, key) or gauge_figures(f.sglang).get(key) is not None):
                continue  # the server's whole-life average, not the last window the log and /metrics give
            _from_server(f, upd, stamps, key, value, f.info_seen.get(key))


def _health_numbers(f: Facts, upd: dict[str, Any], stamps: dict[str, float]) -> None:
    h = f.health
    if h is not None:
        upd["health_latency_ms"] = round(h.latency_ms, 2) if h.latency_ms is not None else None
        if h.latency_ms is not None and h.ts:
            stamps["health_latency_ms"] = h.ts


def _external(spec: ServiceSpec, f: Facts, previous: ServiceStatus, now: float) -> ServiceStatus:
    """A server ddtree-tui did not start: its state is what /health says, never read from a pidfile."""
    h = f.health
    upd: dict[str, Any] = {"pid": None}
    stamps = dict(previous.observed_at)
    _server_numbers(f, upd, stamps)
    _health_numbers(f, upd, stamps)
    upd["observed_at"] = stamps
    if h is None:
        return updated(previous, now, state="unknown", detail="external: not probed yet", **upd)
    if h.ok:
        detail = "external" if f.probe_note is None else f"external; {f.probe_note}"
        return updated(previous, now, state="ready", detail=detail, **upd)
    if h.status_code is not None:  # it answers but is not serving (503 while it loads or shuts down)
        state = "starting" if f.ever_ready_pid is None else "unhealthy"
        return updated(previous, now, state=state, detail=f"external: {h.error}", **upd)
    return updated(previous, now, state="unhealthy", detail=f"external: not answering ({h.error})", **upd)


def _dead(
    spec: ServiceSpec, rec: WatchRecord, f: Facts, previous: ServiceStatus, now: float
) -> ServiceStatus:
    """A pidfile whose process no longer runs (or runs something else): stopping, or crashed and why."""
    pid = rec.pid
    if rec.stopping or f.killing:
        return updated(previous, now, state="stopped", pid=None, detail="stopping", port=spec.port)
    if rec.why in ("pid-reused", "foreign"):
        detail = f"process gone; pid {pid} now belongs to another process ({rec.other_cmd})"
    else:
        detail = exit_words(rec.exit)
    if rec.orphans:
        detail = f"degraded: main pid {pid} {detail}, " + _orphan_words(rec.orphans, rec.orphan_gpu)
    return updated(
        previous,
        now,
        state="crashed",
        pid=pid,
        started_at=rec.started_at,
        detail=f.redact(detail),
        last_log=[f.redact(x) for x in rec.tail],
        port=spec.port,
        health_latency_ms=None,  # a dead process has no health latency (it kept the last one)
    )


def derive_status(spec: ServiceSpec, facts: Facts, previous: ServiceStatus, now: float) -> ServiceStatus:
    """The service's status now, from `facts` and the status it had (fields no rule touches are kept).

    Order of the rules: host unreachable; external (health only); not seen yet (unchanged); untrusted
    workdir; no pidfile (stopped); process gone (stopping / crashed / degraded); alive: ready on a good
    probe, unhealthy once a pid that was ready fails `fail_threshold` probes in a row or one that never was
    passes its startup timeout, else starting.
    """
    f = facts
    rec = f.proc
    if f.unreachable:
        return updated(previous, now, state="unknown", detail=f"host unreachable: {f.unreachable}")
    if spec.launcher == "external":
        return _external(spec, f, previous, now)
    if rec is None:
        return previous
    if rec.untrusted:
        return updated(
            previous, now, state="unknown", pid=None, detail=f"workdir not trusted: {rec.untrusted}"
        )
    if not rec.present:
        return updated(
            previous, now, state="stopped", pid=None, detail=None, port=spec.port, observed_at={}, **_CLEARED
        )
    if not rec.alive:
        return _dead(spec, rec, f, previous, now)
    pid, started, h = rec.pid, rec.started_at, f.health
    upd: dict[str, Any] = {"pid": pid, "started_at": started, "port": running_port(spec, rec)}
    port_note = (
        f"running on port {upd['port']}; the profile says {spec.port}: restart to apply"
        if upd["port"] != spec.port
        else None
    )
    stamps = dict(previous.observed_at)
    _server_numbers(f, upd, stamps)
    # the server's own gauges: between its log lines and /server_info
    for key, val in gauge_figures(f.sglang).items():
        if val is not None:
            _from_server(f, upd, stamps, key, val, f.sglang_seen.get(key))
    _health_numbers(f, upd, stamps)
    upd["observed_at"] = stamps
    if h is not None and h.ok:
        notes = [n for n in (port_note, f.probe_note) if n]
        return updated(previous, now, state="ready", detail="; ".join(notes) or None, **upd)
    why = h.error if h else "no answer"
    if f.ever_ready_pid == pid and f.fail_count >= f.fail_threshold:
        since = f.fail_since or now
        stamp = time.strftime("%H:%M:%S", time.localtime(since))
        return updated(previous, now, state="unhealthy", detail=f"{why} (since {stamp})", since=since, **upd)
    if f.ever_ready_pid == pid:
        return updated(previous, now, **upd)  # a single failed probe: keep ready, try again
    if started and now - started > spec.startup_timeout:
        detail = f"not ready after {spec.startup_timeout:.0f} s: {why}"
        return updated(previous, now, state="unhealthy", detail=detail, **upd)
    return updated(previous, now, state="starting", detail=f.last_line, **upd)

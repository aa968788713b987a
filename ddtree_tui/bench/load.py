"""The load-shape grammar: `--load`, `--duration`, `--requests`, `--slo` parsed into pydantic models.

    sync                      one request at a time (concurrency 1)
    concurrency:1,2,4,8       closed loop: N requests kept in flight, one level per N
    rate:R[,R2...]            open loop: R requests/s at even spacing (one level per rate)
    poisson:R[,seed]          open loop: R requests/s, exponential gaps from a seeded generator
    sweep                     concurrency 1, 2, 4, … SWEEP_MAX, stopping at saturation
    gamma:R,B[,seed]          open loop: R requests/s, gamma gaps of burstiness B (1 = poisson; issue 26)
    ramp:linear|exp,S,E,D     open loop: the rate ramps from S to E requests/s over D (e.g. 30s), then ends
    trace:F                   replay of --trace FILE at F times its timestamps' speed (bench/workloads/)

Pure: no I/O, so the sweep (issue 16) and the TUI parse the same text the same way. Every error names the
option and what was expected.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.bench.bounds import MAX_CONCURRENCY, MAX_LEVELS, MAX_RATE
from ddtree_tui.bench.models import DEFAULT_MAX_NEW_TOKENS, ShapeRequest
from ddtree_tui.bench.workloads.arrivals import Ramp
from ddtree_tui.bench.workloads.base import WorkloadError
from ddtree_tui.bench.workloads.cancel import parse_cancel

LoadKind = Literal["sync", "concurrency", "rate", "poisson", "sweep", "gamma", "ramp", "trace"]
SWEEP_MAX = 256


class LoadError(ValueError):
    """Bad --load / --duration / --requests / --slo text; the message names the option."""


class LoadSpec(BaseModel):
    """A load shape: its kind and its levels (concurrencies for sync/concurrency/sweep, requests/s for
    rate/poisson); `seed` for poisson arrivals."""

    model_config = ConfigDict(frozen=True)

    kind: LoadKind = "sync"
    levels: list[float] = Field(default_factory=lambda: [1.0])
    seed: int | None = None
    # --- workloads (issue 26): gamma's burstiness, a ramp's shape (trace: levels = [speed])
    burstiness: float | None = None
    ramp: Ramp | None = None

    @property
    def closed_loop(self) -> bool:
        """Concurrency kept constant (sync, concurrency, sweep) rather than an arrival rate."""
        return self.kind in ("sync", "concurrency", "sweep")

    @property
    def text(self) -> str:
        """The canonical --load text of this shape."""
        if self.kind in ("sync", "sweep"):
            return self.kind
        if self.kind == "poisson":
            return f"poisson:{_num(self.levels[0])}" + (f",{self.seed}" if self.seed is not None else "")
        if self.kind == "gamma":
            seed = f",{self.seed}" if self.seed is not None else ""
            return f"gamma:{_num(self.levels[0])},{_num(self.burstiness or 1.0)}{seed}"
        if self.kind == "ramp" and self.ramp is not None:
            r = self.ramp
            return f"ramp:{r.strategy},{_num(r.start)},{_num(r.end)},{_num(r.duration_s)}s"
        return f"{self.kind}:" + ",".join(_num(x) for x in self.levels)

    def label(self, level: float) -> str:
        """How a level is named in tables: 'c=4' or '2.5 req/s' (a ramp 'ramp 1→8 req/s', a trace
        'trace ×2')."""
        if self.kind == "ramp" and self.ramp is not None:
            return f"ramp {_num(self.ramp.start)}→{_num(self.ramp.end)} req/s"
        if self.kind == "trace":
            return f"trace ×{_num(level)}"
        return f"c={int(level)}" if self.closed_loop else f"{_num(level)} req/s"


class Slo(BaseModel):
    """Service-level objectives for goodput: a request counts as good when it succeeded and met every one
    that is set (milliseconds)."""

    model_config = ConfigDict(frozen=True)

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    itl_ms: float | None = Field(default=None, gt=0)  # the request's p99 inter-token latency
    e2e_ms: float | None = Field(default=None, gt=0)

    @property
    def text(self) -> str:
        parts = [
            f"{k.removesuffix('_ms')}={_num(v)}ms" for k, v in self.model_dump().items() if v is not None
        ]
        return ",".join(parts)


def _num(x: float) -> str:
    return f"{x:g}"


def sweep_levels(limit: int = SWEEP_MAX) -> list[float]:
    out, c = [], 1
    while c <= limit:
        out.append(float(c))
        c *= 2
    return out


def parse_load(text: str) -> LoadSpec:
    """`sync | concurrency:1,2,4 | rate:R[,R2…] | poisson:R[,seed] | sweep` → LoadSpec; LoadError if not."""
    t = (text or "").strip().lower()
    if t in ("sync", "synchronous"):
        return LoadSpec(kind="sync", levels=[1.0])
    if t == "sweep":
        return LoadSpec(kind="sweep", levels=sweep_levels())
    kind, sep, rest = t.partition(":")
    if sep and kind in ("gamma", "ramp", "trace") and rest.strip():
        return _parse_workload_load(text, kind, rest)
    if not sep or kind not in ("concurrency", "rate", "poisson") or not rest.strip():
        raise LoadError(
            f"--load {text!r}: expected sync, concurrency:1,2,4, rate:R, poisson:R[,seed], gamma:R,B, "
            "ramp:… or sweep"
        )
    parts = [p.strip() for p in rest.split(",")]
    if any(not p for p in parts):
        raise LoadError(f"--load {text!r}: an empty value between commas")
    if kind == "concurrency":
        levels: list[float] = []
        for p in parts:
            if not p.isdigit() or not 1 <= int(p) <= MAX_CONCURRENCY:
                raise LoadError(
                    f"--load {text!r}: concurrency {p!r} is not a whole number 1…{MAX_CONCURRENCY}"
                )
            levels.append(float(int(p)))
        if len(levels) > MAX_LEVELS:
            raise LoadError(f"--load {text!r}: at most {MAX_LEVELS} levels")
        return LoadSpec(kind="concurrency", levels=levels)
    if kind == "poisson":
        if len(parts) > 2:
            raise LoadError(f"--load {text!r}: poisson takes a rate and an optional seed (poisson:4,7)")
        rate = _rate(text, parts[0])
        seed = None
        if len(parts) == 2:
            if not re.fullmatch(r"-?\d+", parts[1]):
                raise LoadError(f"--load {text!r}: seed {parts[1]!r} is not a whole number")
            seed = int(parts[1])
        return LoadSpec(kind="poisson", levels=[rate], seed=seed)
    rates = [_rate(text, p) for p in parts]
    if len(rates) > MAX_LEVELS:
        raise LoadError(f"--load {text!r}: at most {MAX_LEVELS} levels")
    return LoadSpec(kind="rate", levels=rates)


def _rate(text: str, p: str) -> float:
    try:
        r = float(p)
    except ValueError:
        raise LoadError(f"--load {text!r}: rate {p!r} is not a number of requests per second") from None
    if not 0 < r <= MAX_RATE:
        raise LoadError(f"--load {text!r}: rate {p!r} must be above 0 and at most {MAX_RATE:g} req/s")
    return r


# --- workloads (issue 26): gamma bursts, ramps, trace replay speed (schedules in bench/workloads/arrivals.py)
MAX_TRACE_SPEED = 1000.0


def _parse_workload_load(text: str, kind: str, rest: str) -> LoadSpec:
    parts = [p.strip() for p in rest.split(",")]
    if any(not p for p in parts):
        raise LoadError(f"--load {text!r}: an empty value between commas")
    if kind == "trace":
        try:
            speed = float(parts[0])
        except ValueError:
            speed = -1.0
        if len(parts) != 1 or not 0 < speed <= MAX_TRACE_SPEED:
            raise LoadError(f"--trace-speed {parts[0]!r}: a factor above 0 and at most {MAX_TRACE_SPEED:g}")
        return LoadSpec(kind="trace", levels=[speed])
    if kind == "gamma":
        if len(parts) not in (2, 3):
            raise LoadError(f"--load {text!r}: expected gamma:RATE,BURSTINESS[,seed] (e.g. gamma:4,0.5)")
        rate = _rate(text, parts[0])
        try:
            b = float(parts[1])
        except ValueError:
            b = -1.0
        if not 0 < b <= 1000:
            raise LoadError(
                f"--load {text!r}: burstiness {parts[1]!r} must be above 0 (1 = poisson, <1 burstier)"
            )
        seed = None
        if len(parts) == 3:
            if not re.fullmatch(r"-?\d+", parts[2]):
                raise LoadError(f"--load {text!r}: seed {parts[2]!r} is not a whole number")
            seed = int(parts[2])
        return LoadSpec(kind="gamma", levels=[rate], seed=seed, burstiness=b)
    if len(parts) != 4 or parts[0] not in ("linear", "exp", "exponential"):
        raise LoadError(
            f"--load {text!r}: expected ramp:linear|exp,START,END,DURATION (e.g. ramp:linear,1,8,30s)"
        )
    start, end = _rate(text, parts[1]), _rate(text, parts[2])
    dur = parse_duration(parts[3], "ramp duration")
    strategy: Literal["linear", "exp"] = "linear" if parts[0] == "linear" else "exp"
    return LoadSpec(
        kind="ramp", levels=[end], ramp=Ramp(strategy=strategy, start=start, end=end, duration_s=dur)
    )


_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "ms": 0.001}


def parse_duration(text: str, option: str = "--duration") -> float:
    """'90', '90s', '30m', '2h', '1.5m' → seconds (> 0); LoadError naming `option` otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", (text or "").lower())
    if not m or m.group(2) not in _UNITS:
        raise LoadError(f"{option} {text!r}: expected seconds or a number with s, m or h (e.g. 30m)")
    v = float(m.group(1)) * _UNITS[m.group(2)]
    if v <= 0:
        raise LoadError(f"{option} {text!r}: must be above zero")
    return v


def parse_slo(text: str) -> Slo:
    """'ttft=200ms,tpot=20ms' (also itl=, e2e=; units ms or s, bare numbers are ms) → Slo."""
    vals: dict[str, float] = {}
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        key, sep, val = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "itl", "e2e"):
            raise LoadError(f"--slo {part!r}: expected ttft=, tpot=, itl= or e2e= with a time (ttft=200ms)")
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*", val.lower())
        if not m:
            raise LoadError(f"--slo {part!r}: {val!r} is not a time (200ms, 0.2s)")
        ms = float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)
        if ms <= 0:
            raise LoadError(f"--slo {part!r}: must be above zero")
        vals[f"{key}_ms"] = ms
    if not vals:
        raise LoadError("--slo is empty: give e.g. ttft=200ms,tpot=20ms")
    return Slo(**vals)


def shape_params(
    load: str = "",
    *,
    requests: str = "",
    duration: str = "",
    slo: str = "",
    soak: str = "",
    window: str = "",
    sessions: str = "",
    think_time: str = "",
    refs: list[str] | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    baseline: str | None = None,
    trace: str = "",
    trace_speed: str = "",
    max_concurrency: str = "",
    cancel: str = "",
) -> ShapeRequest | None:
    """The TUI dialog's load fields (texts, blank = not given) → ShapeRequest, or None when every field is
    blank (a plain run). The rules are the CLI's: --soak runs for a duration, not --requests; --duration or
    --requests, not both; --sessions leaves out --load and --soak. LoadError names the field."""
    load, requests, duration, slo = load.strip(), requests.strip(), duration.strip(), slo.strip()
    soak, window, sessions, think_time = soak.strip(), window.strip(), sessions.strip(), think_time.strip()
    extra = _workload_params(load, trace, trace_speed, max_concurrency, cancel)  # issue 26
    if extra.get("trace"):
        load = extra.pop("load")
    if not any((load, requests, duration, slo, soak, window, sessions, think_time)) and not extra:
        return None
    if sessions or think_time:
        if extra:
            raise LoadError("agentic sessions take no trace, max in flight or cancel")
        if load or soak or requests or duration:
            raise LoadError("agentic sessions run closed-loop conversations: leave load and soak blank")
        if not sessions.isdigit() or not 1 <= int(sessions) <= MAX_CONCURRENCY:  # = bounds.MAX_SESSIONS
            raise LoadError(f"sessions {sessions!r}: a whole number 1…{MAX_CONCURRENCY}")
        think = parse_duration(think_time, "think time") if think_time and think_time != "0" else 0.0
        return ShapeRequest(
            refs=refs or [],
            prompts="agentic",
            sessions=int(sessions),
            think_time_s=think,
            max_new_tokens=max_new_tokens,
            baseline=baseline,
        )
    spec = parse_load(load or "sync")
    slo_text = parse_slo(slo).text if slo else None
    if soak or window:
        if not soak:
            raise LoadError("a soak window needs a soak duration (e.g. 30m)")
        if requests:
            raise LoadError("a soak runs for its duration, not a number of requests")
        if extra:
            raise LoadError("trace, max in flight and cancel are for load runs, not a soak")
        return ShapeRequest(
            refs=refs or [],
            load=spec.text,
            soak=True,
            duration_s=parse_duration(soak, "soak duration"),
            window_s=parse_duration(window, "window") if window else 10.0,
            slo=slo_text,
            max_new_tokens=max_new_tokens,
            baseline=baseline,
        )
    if requests and duration:
        raise LoadError("give a duration or a number of requests per level, not both")
    if requests and (not requests.isdigit() or int(requests) < 1):
        raise LoadError(f"--requests {requests!r}: a whole number, at least 1")
    return ShapeRequest(
        refs=refs or [],
        load=spec.text,
        requests=int(requests) if requests else None,
        duration_s=parse_duration(duration) if duration else None,
        slo=slo_text,
        max_new_tokens=max_new_tokens,
        baseline=baseline,
        **extra,
    )


def _workload_params(load: str, trace: str, speed: str, cap: str, cancel: str) -> dict[str, Any]:
    """The dialog's workload fields (issue 26) as ShapeRequest fields; the rules are cli/bench.py's."""
    trace, speed, cap, cancel = trace.strip(), speed.strip(), cap.strip(), cancel.strip()
    out: dict[str, Any] = {}
    if speed and not trace:
        raise LoadError("a trace speed needs a trace file")
    if trace:
        if load:
            raise LoadError("a trace sends at its own timestamps: leave the load shape blank")
        out |= {"trace": trace, "prompts": f"trace:{trace}", "load": parse_load(f"trace:{speed or '1'}").text}
    if cap:
        if not cap.isdigit() or not 1 <= int(cap) <= MAX_CONCURRENCY:
            raise LoadError(f"max in flight {cap!r}: a whole number 1…{MAX_CONCURRENCY}")
        if not trace and (not load or parse_load(load).closed_loop):
            raise LoadError("max in flight caps an open loop: rate:, poisson:, gamma:, ramp: or a trace")
        out["max_concurrency"] = int(cap)
    if cancel:
        try:
            out["cancel"] = parse_cancel(cancel).text
        except WorkloadError as e:
            raise LoadError(str(e)) from None
    return out

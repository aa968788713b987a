"""What a sweep is: dimensions (`--set KEY=v1,v2`), load levels, the points they make, constraints, and the
override layer that turns a profile's ServiceSpec into the spec of one point (the profile file is never
edited here; `sweep apply` does that, on request).

A dimension's KEY is one of:
- a ServiceSpec field (`budget`, `block_size`, `mode`, `mem_fraction_static`, ...), or a nested `sim.X`;
- `env.NAME`: one `[service.env]` variable (e.g. `env.SGLANG_DDTREE_MAX_TOPK`);
- `--flag` or `args.flag`: one flag of `extra_args` (value `true` adds a bare switch, `false` removes it).
Every value is validated by the profile's own pydantic model before anything is relaunched.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ddtree_tui.config import SECRET_KEY_RE, ServiceSpec
from ddtree_tui.lib.jsontypes import JsonObject

Objective = Literal["tok_s", "goodput", "ttft"]
Strategy = Literal["grid", "one-at-a-time", "tpe", "nsga2"]  # tpe, nsga2: sweep/study.py chooses
FIXED_KEYS = {"name", "port", "launcher", "bind"}  # changing these would be a different service


class SweepError(ValueError):
    """The sweep cannot run as asked; the message names the --set, the key and what was expected."""


class Dimension(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    values: list[str]


class Constraint(BaseModel):
    model_config = ConfigDict(frozen=True)

    metric: str
    op: Literal["<", "<=", ">", ">="]
    value: float  # in the metric's own unit (ms for times)
    text: str

    def ok(self, v: float | None) -> bool:
        if v is None:
            return False
        return {
            "<": v < self.value,
            "<=": v <= self.value,
            ">": v > self.value,
            ">=": v >= self.value,
        }[self.op]


class Point(BaseModel):
    """One measured configuration: launch overrides + one load level."""

    index: int
    overrides: dict[str, str] = Field(default_factory=dict)
    concurrency: int = 1

    @property
    def launch_key(self) -> str:
        return json.dumps(self.overrides, sort_keys=True)

    def label(self) -> str:
        words = [f"{k}={v}" for k, v in self.overrides.items()] or ["(profile)"]
        return " ".join(words) + (f" c={self.concurrency}" if self.concurrency != 1 else "")


# --- parsing --------------------------------------------------------------------------------------------


def parse_set(text: str) -> Dimension:
    """`KEY=v1,v2,...` -> Dimension; SweepError naming the text otherwise."""
    key, sep, vals = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SweepError(f"--set {text!r}: expected KEY=v1,v2,... (e.g. budget=8,16,32)")
    values = [v.strip() for v in vals.split(",") if v.strip()]
    if not values:
        raise SweepError(f"--set {text!r}: no values after '='")
    if len(set(values)) != len(values):
        raise SweepError(f"--set {text!r}: a value is listed twice")
    check_key(key)
    return Dimension(key=key, values=values)


def check_key(key: str) -> None:
    if SECRET_KEY_RE.search(key.replace("-", "_")):
        raise SweepError(
            f"--set {key}: a secret is never a dimension (its values would be written into sweep.json)"
        )
    if key.startswith("env."):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key[4:]):
            raise SweepError(f"--set {key}: {key[4:]!r} is not an environment variable name")
        return
    if key.startswith("--") or key.startswith("args."):
        return
    top = key.split(".", 1)[0]
    if top not in ServiceSpec.model_fields:
        known = ", ".join(sorted(k for k in ServiceSpec.model_fields if k not in FIXED_KEYS))
        raise SweepError(f"--set {key}: not a service key, env.NAME or --flag (service keys: {known})")
    if top in FIXED_KEYS:
        raise SweepError(f"--set {key}: '{top}' identifies the service and cannot be swept")
    if top in ("env", "extra_args", "gpus"):
        raise SweepError(
            f"--set {key}: sweep one variable (env.NAME) or one flag (--flag), not the whole list"
        )


def parse_load(text: str | None) -> list[int]:
    """`concurrency:1,8` -> [1, 8] (None -> [1]). The load-shapes work will replace this parser."""
    if not text:
        return [1]
    kind, sep, vals = text.partition(":")
    if kind.strip() != "concurrency" or not sep:
        raise SweepError(f"--load {text!r}: only concurrency:a,b,... is supported for now")
    try:
        levels = [int(v) for v in vals.split(",") if v.strip()]
    except ValueError:
        raise SweepError(f"--load {text!r}: concurrency levels must be integers") from None
    if not levels or any(n < 1 or n > 4096 for n in levels):
        raise SweepError(f"--load {text!r}: concurrency levels must be 1..4096")
    return levels


_CONSTRAINT_RE = re.compile(r"^\s*([a-z_0-9]+)\s*(<=|>=|<|>)\s*([0-9.]+)\s*(ms|s|%)?\s*$")
CONSTRAINT_METRICS = {
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "itl_p50",
    "itl_p90",
    "tok_s",
    "goodput",
    "accept_length",
    "output_throughput",
    "failed",
}


def parse_constraint(text: str) -> Constraint:
    """`ttft_p90<300ms`, `itl_p50<=20ms`, `tok_s>100`, `accept_length>=3`; times kept in ms."""
    m = _CONSTRAINT_RE.match(text)
    if not m:
        raise SweepError(f"--constraint {text!r}: expected METRIC<VALUE[ms|s], e.g. ttft_p90<300ms")
    metric, op, num, unit = m.groups()
    if metric not in CONSTRAINT_METRICS:
        raise SweepError(
            f"--constraint {text!r}: unknown metric (known: {', '.join(sorted(CONSTRAINT_METRICS))})"
        )
    value = float(num)
    timed = metric.startswith(("ttft", "itl"))
    if unit == "s" and timed:
        value *= 1000.0
    elif unit in ("s", "ms") and not timed:
        raise SweepError(f"--constraint {text!r}: {metric} is not a time")
    return Constraint(metric=metric, op=op, value=value, text=text.strip())  # type: ignore[arg-type]


# --- the override layer ---------------------------------------------------------------------------------


def _typed(raw: str) -> Any:
    """'16' -> 16, '0.8' -> 0.8, 'true' -> True, else the text; pydantic decides whether it fits."""
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _flag(key: str) -> str:
    return key if key.startswith("--") else "--" + key.removeprefix("args.")


def _set_flag(args: list[str], flag: str, raw: str) -> list[str]:
    """extra_args with `flag` set to `raw` (replacing `flag V` or `flag=V`), or removed for `false`."""
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == flag:
            nxt = args[i + 1] if i + 1 < len(args) else None
            i += 2 if nxt is not None and not nxt.startswith("-") else 1
            continue
        if a.startswith(flag + "="):
            i += 1
            continue
        out.append(a)
        i += 1
    low = raw.lower()
    if low == "false":
        return out
    if low == "true":
        return [*out, flag]
    return [*out, flag, raw]


def apply_overrides(spec: ServiceSpec, overrides: dict[str, str]) -> ServiceSpec:
    """The spec of one point: the profile's spec with `overrides`, validated by the profile model."""
    data = spec.model_dump()
    for key, raw in overrides.items():
        check_key(key)
        if key.startswith("env."):
            data["env"] = {**data.get("env", {}), key[4:]: raw}
        elif key.startswith("--") or key.startswith("args."):
            data["extra_args"] = _set_flag(list(data.get("extra_args", [])), _flag(key), raw)
        elif "." in key:
            top, sub = key.split(".", 1)
            cur = dict(data.get(top) or {})
            cur[sub] = _typed(raw)
            data[top] = cur
        else:
            data[key] = None if raw.lower() in ("none", "null") else _typed(raw)
    try:
        return ServiceSpec.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ())) or "service"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        cause = (err.get("ctx") or {}).get("error")
        if cause is not None and getattr(cause, "loc", None):
            loc = ".".join(str(x) for x in cause.loc)
            msg = str(cause)
        shown = ", ".join(f"{k}={v}" for k, v in overrides.items())
        raise SweepError(f"--set {shown}: {loc}: {msg} (service '{spec.name}')") from None
    except ValueError as e:
        shown = ", ".join(f"{k}={v}" for k, v in overrides.items())
        raise SweepError(f"--set {shown}: {e} (service '{spec.name}')") from None


def current_value(spec: ServiceSpec, key: str) -> str | None:
    """What the profile has for a dimension's key (None: unset)."""
    if key.startswith("env."):
        return spec.env.get(key[4:])
    if key.startswith("--") or key.startswith("args."):
        flag = _flag(key)
        args = spec.extra_args
        for i, a in enumerate(args):
            if a == flag:
                nxt = args[i + 1] if i + 1 < len(args) else None
                return nxt if nxt is not None and not nxt.startswith("-") else "true"
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
        return None
    obj: Any = spec
    for part in key.split("."):
        obj = getattr(obj, part, None)
    if obj is None:
        return None
    return str(obj).lower() if isinstance(obj, bool) else str(obj)


def plan_points(dims: Sequence[Dimension], loads: Sequence[int], strategy: Strategy = "grid") -> list[Point]:
    """The points, grouped so that points sharing a launch config are consecutive (one restart each)."""
    combos: list[dict[str, str]] = []
    if strategy != "one-at-a-time" or not dims:  # tpe/nsga2 choose among the grid's points
        for values in itertools.product(*(d.values for d in dims)):
            combos.append({d.key: v for d, v in zip(dims, values, strict=True)})
    else:  # one-at-a-time: vary one key, the others as the profile has them
        seen: set[str] = set()
        for d in dims:
            for v in d.values:
                c = {d.key: v}
                k = json.dumps(c, sort_keys=True)
                if k not in seen:
                    seen.add(k)
                    combos.append(c)
    points: list[Point] = []
    for c in combos:
        for n in loads:
            points.append(Point(index=len(points), overrides=c, concurrency=n))
    return points


def sweep_id(
    ref: str, dims: Sequence[Dimension], loads: Sequence[int], strategy: str, extra: JsonObject
) -> str:
    """A fingerprint of the sweep definition: `--resume` refuses a directory made by a different sweep."""
    blob = json.dumps(
        {
            "ref": ref,
            "dims": [d.model_dump() for d in dims],
            "loads": list(loads),
            "strategy": strategy,
            **extra,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]

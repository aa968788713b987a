"""The simulator's landscape as a function: what a simulated service with given DFlash/DDTree settings is
expected to deliver at a concurrency (tok/s per request, throughput, TTFT), from the same model the server
follows (`sim/config.py`: accept length, step time and their constants, each cited or marked modelled).

Why: a sweep's true optimum per concurrency, and where speculation stops beating the no-speculation baseline
(the crossover), are computable here, so tests and `benchmarks/lab.py` can check that the search finds them.
Expected values ignore sampling noise and the last, cut pass of a request; they are in simulated seconds
(time_scale 1). Always a model of the simulator, never of a real GPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from ddtree_tui.sim.config import SimConfig

# the sweep keys the landscape understands, and the SimConfig field each sets (the sweep's spelling: a
# ServiceSpec field, `env.NAME` or `--flag`; the simulator reads the env and flags the same way)
KEY_FIELDS: dict[str, str] = {
    "budget": "budget",
    "--speculative-ddtree-budget": "budget",
    "block_size": "block_size",
    "--speculative-dflash-block-size": "block_size",
    "--speculative-num-draft-tokens": "block_size",
    "--speculative-dflash-draft-window-size": "draft_window",
    "env.SGLANG_DDTREE_MAX_TOPK": "max_topk",
    "env.SGLANG_DDTREE_DEPTH_BONUS": "depth_bonus",
    "mode": "mode",
    "algorithm": "algorithm",
    "sim.accept_length": "accept_length",
}

# The demo's landscape: a DDTree tree-mode service on the realistic simulator (batch slowdown on), swept over
# budget x top-k x block size: 6 x 4 x 3 = 72 grid points.
DEMO_BASE = SimConfig(
    algorithm="ddtree", mode="tree", budget=16, max_topk=2, decode_rate=40.0, batch_slowdown=True
)
DEMO_DIMS: dict[str, list[str]] = {
    "budget": ["4", "8", "12", "16", "24", "32"],
    "env.SGLANG_DDTREE_MAX_TOPK": ["1", "2", "3", "4"],
    "block_size": ["8", "12", "16"],
}


class Expected(BaseModel):
    """The expected numbers of one setting at one concurrency (simulated seconds)."""

    model_config = ConfigDict(frozen=True)

    concurrency: int
    accept_length: float  # tokens per verify pass
    step_ms: float  # one verify pass with `concurrency` requests running
    tok_s: float  # output tok/s of one request
    throughput: float  # output tok/s of all running requests together
    ttft_ms: float  # prefill of `prompt_tokens` + one step (0 prefill without a prefill rate)


def config_for(base: SimConfig, overrides: Mapping[str, str]) -> SimConfig:
    """`base` with a sweep point's overrides; ValueError naming a key the landscape does not model."""
    update: dict[str, object] = {}
    for key, raw in overrides.items():
        field = KEY_FIELDS.get(key)
        if field is None:
            known = ", ".join(sorted(KEY_FIELDS))
            raise ValueError(f"landscape: key {key!r} is not modelled (known: {known})")
        if field in ("mode", "algorithm"):
            update[field] = raw
        elif field in ("depth_bonus", "accept_length"):
            update[field] = float(raw)
        else:
            update[field] = int(raw)
    return SimConfig.model_validate({**base.model_dump(), **update})


def expected(cfg: SimConfig, concurrency: int = 1, prompt_tokens: int = 0) -> Expected:
    """What `cfg` delivers per request and in total with `concurrency` requests running (capped by its
    max_running_requests: beyond it requests queue, so per-request speed is the capped batch's)."""
    running = max(1, concurrency)
    if cfg.max_running_requests:
        running = min(running, cfg.max_running_requests)
    one = cfg.model_copy(update={"time_scale": 1.0})
    step = one.step_seconds(running)
    acc = one.effective_accept_length
    tok_s = acc / step
    prefill = prompt_tokens / cfg.prefill_rate if cfg.prefill_rate > 0 else 0.0
    return Expected(
        concurrency=concurrency,
        accept_length=acc,
        step_ms=step * 1000.0,
        tok_s=tok_s,
        throughput=tok_s * running,
        ttft_ms=(prefill + step) * 1000.0,
    )


def baseline_of(cfg: SimConfig) -> SimConfig:
    """The same server without speculation (the crossover's reference)."""
    return cfg.model_copy(update={"algorithm": "baseline", "mode": None, "budget": None})


def grid(dims: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """Every combination of the dimensions' values, in the sweep's grid order."""
    keys = list(dims)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(dims[k] for k in keys))]


def value(e: Expected, objective: str) -> float:
    """The objective's value (higher is better): tok_s per request, throughput, or -TTFT."""
    if objective == "tok_s":
        return e.tok_s
    if objective in ("throughput", "output_throughput", "goodput"):
        return e.throughput
    if objective == "ttft":
        return -e.ttft_ms
    raise ValueError(f"landscape: unknown objective {objective!r}")


def optimum(
    base: SimConfig, dims: Mapping[str, Sequence[str]], concurrency: int = 1, objective: str = "tok_s"
) -> tuple[dict[str, str], float]:
    """The grid point with the best expected objective at `concurrency`, and that value."""
    scored = [(value(expected(config_for(base, o), concurrency), objective), o) for o in grid(dims)]
    best = max(scored, key=lambda t: t[0])
    return best[1], best[0]


def crossover(
    base: SimConfig,
    dims: Mapping[str, Sequence[str]],
    levels: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    objective: str = "tok_s",
) -> int | None:
    """The first concurrency of `levels` where the best setting no longer beats the baseline (None: it
    beats it at every level)."""
    ref = baseline_of(base)
    for c in levels:
        _o, best = optimum(base, dims, c, objective)
        if best <= value(expected(ref, c), objective):
            return c
    return None

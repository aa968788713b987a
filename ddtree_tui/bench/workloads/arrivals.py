"""Arrival schedules of an open loop: the planned send times of one segment, seconds after its start.

    rate:R          even spacing, 1/R
    poisson:R       exponential gaps, mean 1/R
    gamma:R,B       gamma gaps with shape B and mean 1/R, as vLLM's and SGLang's `--burstiness`: B = 1 is
                    poisson, B < 1 burstier (clumps and lulls), B > 1 more even
    ramp:linear|exp,START,END,DURATION
                    the rate goes from START to END req/s over DURATION (linearly, or exponentially:
                    START·(END/START)^(t/DURATION)); each gap is 1/rate at the previous send; the
                    schedule ends at DURATION
    trace           the trace's timestamps / speed (trace.py)

The first send is at 0. Pure and seeded: the generator is handed in (loadrun.py seeds one per segment, so
every service sees the same arrivals).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.bench.bounds import MAX_RATE

MAX_RAMP_S = 7 * 24 * 3600.0


class Ramp(BaseModel):
    """A ramp of the offered rate: from `start` to `end` req/s over `duration_s`."""

    model_config = ConfigDict(frozen=True)

    strategy: Literal["linear", "exp"] = "linear"
    start: float = Field(gt=0, le=MAX_RATE)
    end: float = Field(gt=0, le=MAX_RATE)
    duration_s: float = Field(gt=0, le=MAX_RAMP_S)

    def rate_at(self, t: float) -> float:
        """The planned rate (req/s) at `t` seconds into the ramp (END after it)."""
        f = min(1.0, max(0.0, t / self.duration_s))
        if self.strategy == "exp":
            return float(self.start * (self.end / self.start) ** f)
        return self.start + (self.end - self.start) * f


def rate_offsets(rate: float) -> Iterator[float]:
    t = 0.0
    while True:
        yield t
        t += 1.0 / rate


def poisson_offsets(rate: float, rng: random.Random) -> Iterator[float]:
    t = 0.0
    while True:
        yield t
        t += rng.expovariate(rate)


def gamma_offsets(rate: float, burstiness: float, rng: random.Random) -> Iterator[float]:
    """Gaps ~ Gamma(shape=burstiness, scale=1/(rate·burstiness)): mean 1/rate, CV 1/√burstiness."""
    t = 0.0
    theta = 1.0 / (rate * burstiness)
    while True:
        yield t
        t += rng.gammavariate(burstiness, theta)


def ramp_offsets(ramp: Ramp) -> Iterator[float]:
    t = 0.0
    while t <= ramp.duration_s + 1e-9:
        yield t
        t += 1.0 / ramp.rate_at(t)


def fixed_offsets(offsets: Sequence[float]) -> Iterator[float]:
    yield from offsets


def planned_rate(offsets: Sequence[float]) -> float | None:
    """The rate a list of planned sends asks for: sends after the first / first → last send (the same
    definition as the rate a level is measured to have sent, levels.py `sent_rate`)."""
    if len(offsets) < 2:
        return None
    span = offsets[-1] - offsets[0]
    return (len(offsets) - 1) / span if span > 0 else None

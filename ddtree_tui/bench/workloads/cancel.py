"""Client-side cancellation (AIPerf's request cancellation): `--cancel FRACTION[,DELAY]` aborts that
fraction of the counted requests DELAY seconds after each is sent (default 0.5 s).

The client closes the request's connection (bench/stream.py drops a connection whose response is not
complete), which is how an SGLang server learns of it: its tokenizer manager sees the disconnect
(`request.is_disconnected()` while it waits, or the stream's abort task) and aborts the request, freeing its
KV cache, logging "Request is disconnected from the client side. Abort request rid=..." (the simulator
logs the same words). A
request that ends before its delay is measured as usual. A cancelled request is counted apart: never a
failure, never in the latency statistics (record.py `CancelStats`).

Which requests: a generator seeded by the run's seed and the segment (loadrun.py), so every service of a
level has the same ones cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Awaitable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.bench.workloads.base import WorkloadError

DEFAULT_DELAY_S = 0.5
MAX_DELAY_S = 3600.0
T = TypeVar("T")


class CancelSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    fraction: float = Field(gt=0, le=1)
    delay_s: float = Field(default=DEFAULT_DELAY_S, ge=0, le=MAX_DELAY_S)

    @property
    def text(self) -> str:
        return f"{self.fraction:g},{self.delay_s:g}"


def parse_cancel(text: str) -> CancelSpec:
    """`FRACTION[,DELAY]` (0 < FRACTION ≤ 1, DELAY seconds, a bare number or with s / ms) → CancelSpec."""
    frac, _, delay = (text or "").strip().partition(",")
    try:
        f = float(frac)
    except ValueError:
        raise WorkloadError(f"--cancel {text!r}: FRACTION {frac!r} is not a number (e.g. 0.1,0.5)") from None
    if not 0 < f <= 1:
        raise WorkloadError(f"--cancel {text!r}: FRACTION must be above 0 and at most 1")
    d = DEFAULT_DELAY_S
    if delay.strip():
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*", delay.lower())
        if not m:
            raise WorkloadError(f"--cancel {text!r}: DELAY {delay!r} is not a time (0.5, 500ms, 2s)")
        d = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
        if d > MAX_DELAY_S:
            raise WorkloadError(f"--cancel {text!r}: DELAY above {MAX_DELAY_S:g} s")
    return CancelSpec(fraction=f, delay_s=d)


class Picker:
    """Which requests of a segment are cancelled: the k-th send is when the seeded draw k is < fraction."""

    def __init__(self, spec: CancelSpec, seed: str) -> None:
        self.spec = spec
        self._rng = random.Random(f"cancel:{seed}")

    def pick(self) -> bool:
        return self._rng.random() < self.spec.fraction


async def cancel_after(work: Awaitable[T], delay_s: float) -> tuple[bool, T | None]:
    """(cancelled, result): `work`'s result when it ends within `delay_s`, else it is cancelled (its
    connection closed) and (True, None)."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=delay_s)
    except BaseException:  # the run is stopped: the request goes with it
        task.cancel()
        raise
    if task in done:
        return False, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return True, None

"""An Evaluator on the simulator's landscape function instead of relaunched services: the expected numbers
of a point (sim/landscape.py) with modelled, seeded measurement noise, reported window by window, and an
optional modelled relaunch time. It lets the lab (`benchmarks/lab.py`) and the tests run the optimizer's
real loop (sweep/workers.py, sweep/optimizer.py) many times, with lost hosts, at no GPU cost. Always
labelled modelled: it measures nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import statistics
from collections.abc import Sequence

from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.landscape import Expected, config_for, expected
from ddtree_tui.sweep import optimizer as opt
from ddtree_tui.sweep.workers import Outcome, Report


def _value(e: Expected, objective: str) -> float:
    return {
        "tok_s": e.tok_s,
        "throughput": e.throughput,
        "goodput": e.throughput,
        "ttft": e.ttft_ms,
        "ttft_p90": e.ttft_ms,
    }[objective]


class ModelledEvaluator:
    """`evaluate` = the landscape's expected value x (1 + noise) per window (`noise`: the relative standard
    deviation of one window's mean; a point's value is the mean of its windows), after `relaunch_s` s of
    modelled relaunch; a worker in `lose` is lost (raises, as a dropped SSH connection does) on its
    `lose[worker]`-th point, mid-measurement."""

    def __init__(
        self,
        base: SimConfig,
        levels: Sequence[int] = (1,),
        objectives: Sequence[str] = ("tok_s",),
        *,
        noise: float = 0.02,
        windows: int = 3,
        seed: int = 0,
        relaunch_s: float = 0.0,
        lose: dict[str, int] | None = None,
        prompt_tokens: int = 200,
    ) -> None:
        self.base = base
        self.levels = list(levels)
        self.objectives = list(objectives)
        self.noise = noise
        self.windows = windows
        self.seed = seed
        self.relaunch_s = relaunch_s
        self.lose = dict(lose or {})
        self.prompt_tokens = prompt_tokens
        self.calls: list[tuple[str, str]] = []  # (worker, point key) of every relaunch, in order
        self._n: dict[str, int] = {}

    def truth(self, overrides: dict[str, str], concurrency: int) -> Expected:
        return expected(config_for(self.base, overrides), concurrency, self.prompt_tokens)

    def _rng(self, key: str, attempt: int) -> random.Random:
        h = hashlib.sha256(f"{self.seed}\x00{key}\x00{attempt}".encode()).digest()
        return random.Random(int.from_bytes(h[:8], "big"))

    async def evaluate(self, worker: str, trial: int, overrides: dict[str, str], report: Report) -> Outcome:
        key = opt.key_of(overrides)
        self.calls.append((worker, key))
        n = self._n[worker] = self._n.get(worker, 0) + 1
        rng = self._rng(key, sum(1 for _w, k in self.calls if k == key))
        if self.relaunch_s:
            await asyncio.sleep(self.relaunch_s)
        sums: dict[str, list[float]] = {o: [] for o in self.objectives}
        step = 0
        for c in self.levels:
            e = self.truth(overrides, c)
            seen: dict[str, list[float]] = {o: [] for o in self.objectives}
            for w in range(self.windows):
                if self.lose.get(worker) == n and w == 1:
                    raise ConnectionError(f"{worker}: connection lost (modelled)")
                for o in self.objectives:  # one window's mean, with its noise
                    seen[o].append(_value(e, o) * (1 + rng.gauss(0.0, self.noise)))
                if await report(step, statistics.fmean(seen[self.objectives[0]])):
                    return Outcome(
                        kind="pruned",
                        reason=f"pruned by the median rule after window {step + 1} (modelled)",
                    )
                step += 1
            for o in self.objectives:  # the level's value is the mean of its windows, as measured
                sums[o].append(statistics.fmean(seen[o]))
        return Outcome(kind="done", values={o: statistics.fmean(v) for o, v in sums.items()})

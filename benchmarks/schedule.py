"""How often the schedule per concurrency (sweep/schedule.py) picks the true best setting of each level, and
finds the crossover, when the true answer is known: the simulator's DDTree model (sim/config.py:
`ddtree_expected_speed`, the batch slowdown constants) gives the expected per-request tok/s of every setting at
every concurrency, and of the non-speculative baseline; requests are drawn around it with multiplicative
log-normal noise (prompts of different speeds, the same prompts for every setting) and scored as a sweep
would score them. No server, no timing: a table of choices, side by side per noise level and repeat count.

Grid: budget {4, 8, 16, 32} x top-k {1, 2, 4} (12 settings); levels 1, 2, 4, 8, 16, 32, 64; seeds 0..9.

Columns:
  noise     the log-normal sigma of one request's tok/s around its setting's expected value
  repeats   repeats per cell (each repeat: max(c, 3) requests in flight at once)
  exact     % of (seed, level) choices that are the true best setting
  ≤2 %      % whose true speed is within 2 % of the true best's (a near-tie picked the other way)
  crossover % of seeds whose crossover is the true one (c=64: the best setting loses to the baseline there)
  conf      mean confidence of the choices (bootstrap P(chosen beats the runner-up))
  conf|miss mean confidence of the choices that were not exact (low is honest)

Run:  python benchmarks/schedule.py [--seeds N] [--boot N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from ddtree_tui.sim.config import BATCH_GROWTH_BASELINE, BATCH_GROWTH_SPEC, ddtree_expected_speed
from ddtree_tui.sweep import schedule as sch
from ddtree_tui.sweep.spec import Dimension
from ddtree_tui.sweep.state import BaselineRecord, Measurement, PointRecord, Sample, SweepState

GRID = [(b, k) for b in (4, 8, 16, 32) for k in (1, 2, 4)]
LEVELS = [1, 2, 4, 8, 16, 32, 64]
PROMPT_SPEED = {"a": 1.0, "b": 0.8, "c": 1.2}
TOPK = "env.SGLANG_DDTREE_MAX_TOPK"


def speed(b: int, k: int, c: int) -> float:
    return 40.0 * ddtree_expected_speed(3.4, b, k, c) / (1 + BATCH_GROWTH_SPEC * (c - 1))


def base_speed(c: int) -> float:
    return 40.0 / (1 + BATCH_GROWTH_BASELINE * (c - 1))


def draw(rng: random.Random, mean: float, c: int, repeats: int, noise: float) -> Measurement:
    prompts = list(PROMPT_SPEED)
    out = []
    for r in range(repeats):
        for i in range(max(c, len(prompts))):
            p = prompts[i % len(prompts)]
            v = mean * PROMPT_SPEED[p] * rng.lognormvariate(0.0, noise)
            out.append(Sample(prompt_id=p, repeat=r, ok=True, tok_s=v, started_at=10.0 * r, e2e_s=5.0))
    return Measurement(concurrency=c, samples=out)


def state(seed: int, repeats: int, noise: float) -> SweepState:
    rng = random.Random(seed)
    pts = [
        PointRecord(index=i, overrides={"budget": str(b), TOPK: str(k)}, concurrency=c, status="done",
                    measurement=draw(rng, speed(b, k, c), c, repeats, noise))
        for i, ((b, k), c) in enumerate((bk, c) for bk in GRID for c in LEVELS)
    ]  # fmt: skip
    bases = [
        BaselineRecord(seq=j, at=0.0, after_point=-1, measurement=draw(rng, base_speed(c), c, repeats, noise))
        for j, c in enumerate(LEVELS)
    ]
    return SweepState(
        id="bench", ref="sim/ddtree", dims=[Dimension(key="budget", values=["4", "8", "16", "32"]),
        Dimension(key=TOPK, values=["1", "2", "4"])], loads=LEVELS, strategy="grid", prompts="seed3",
        repeats=repeats, warmup=0, max_new_tokens=64, objective="tok_s", points=pts, baselines=bases,
        started_at=0.0, updated_at=0.0,
    )  # fmt: skip


def true_crossover() -> int | None:
    out = None
    for c in reversed(LEVELS):
        if max(speed(b, k, c) for b, k in GRID) > base_speed(c):
            break
        out = c
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples of each confidence")
    a = ap.parse_args()
    cross = true_crossover()
    best = {c: max(GRID, key=lambda bk, c=c: speed(*bk, c)) for c in LEVELS}
    print(f"true best per level: {json.dumps({c: f'budget={b} topk={k}' for c, (b, k) in best.items()})}")
    print(f"true crossover: c={cross}   seeds: {a.seeds}   bootstrap resamples: {a.boot}")
    print(
        f"{'noise':>6} {'repeats':>7} {'exact':>7} {'≤2 %':>7} {'crossover':>9} {'conf':>6} {'conf|miss':>9} {'s':>6}"
    )
    for noise in (0.01, 0.03, 0.05):
        for repeats in (2, 3, 5):
            t0 = time.monotonic()
            exact = near = crossed = n = 0
            conf: list[float] = []
            miss_conf: list[float] = []
            for seed in range(a.seeds):
                s = sch.build(state(seed, repeats, noise), n_boot=a.boot)
                crossed += s.crossover == cross
                for lv in s.levels:
                    n += 1
                    want = best[lv.concurrency]
                    got = (int((lv.overrides or {}).get("budget", 0)), int((lv.overrides or {}).get(TOPK, 0)))
                    hit = got == want
                    exact += hit
                    near += got in GRID and speed(*got, lv.concurrency) >= 0.98 * speed(*want, lv.concurrency)
                    if lv.confidence is not None:
                        conf.append(lv.confidence)
                        if not hit:
                            miss_conf.append(lv.confidence)
            mc = f"{statistics.fmean(miss_conf):.2f}" if miss_conf else "-"
            print(
                f"{noise:>6.2f} {repeats:>7} {100 * exact / n:>6.0f}% {100 * near / n:>6.0f}% "
                f"{100 * crossed / a.seeds:>8.0f}% {statistics.fmean(conf):>6.2f} {mc:>9} {time.monotonic() - t0:>6.1f}"
            )


if __name__ == "__main__":
    main()

"""The simulator's prefix cache, before and after issue 26: the list scan it had (the longest common prefix
with each of the last 256 prompts, by binary search over slices) against sim/prefixcache.py (chained page
keys: one pass over the prompt), on trace-like prompts, side by side in one run.

Workloads: the sample mooncake trace (ddtree_tui/data/mooncake-sample.jsonl, 24 requests, ~1.2–2.5k
tokens), and a synthetic trace of 300 requests of 8 × 512-token blocks with shared heads (mooncake's own
prompts are 7k tokens on average), and one of 400 × 16 blocks. Both caches must agree on every hit (checked); the table gives the time
per request of each (best of 5 passes) and their ratio.

Run:  python benchmarks/sim_prefix_cache.py
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from ddtree_tui.bench.workloads.trace import Trace, TraceRecord, load_trace, trace_items
from ddtree_tui.sim.config import CACHE_PAGE_CHARS
from ddtree_tui.sim.prefixcache import PrefixCache

SAMPLE = Path(__file__).resolve().parents[1] / "ddtree_tui" / "data" / "mooncake-sample.jsonl"


def _common_prefix_len(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def old_cache() -> Callable[[str], int]:
    """The list scan of sim/engine.py before issue 26, as it was."""
    cache: list[str] = []

    def hit(prompt: str) -> int:
        best = 0
        for p in cache:
            if len(p) <= best:
                continue
            n = _common_prefix_len(prompt, p)
            n = n if n == len(p) else n - n % CACHE_PAGE_CHARS
            best = max(best, n)
        if prompt not in cache:
            cache.append(prompt)
            del cache[:-256]
        return best

    return hit


def synthetic(n: int = 300, blocks: int = 8) -> Trace:
    rng = random.Random(26)
    heads = [[1000 * h + i for i in range(rng.randint(2, 6))] for h in range(12)]
    recs, nxt = [], 10**6
    for i in range(n):
        head = rng.choice(heads)
        tail = list(range(nxt, nxt + blocks - len(head)))
        nxt += len(tail)
        recs.append(TraceRecord(line=i + 1, timestamp_ms=i * 10.0, input_length=blocks * 512, output_length=8,
                                hash_ids=tuple(head + tail)))  # fmt: skip
    return Trace(path="synthetic", sha256="-", records=recs)


def measure(
    prompts: list[str], make: Callable[[], Callable[[str], int]], repeats: int = 5
) -> tuple[float, list[int]]:
    """The best of `repeats` passes (a fresh cache each), seconds per request, and the hits."""
    best, hits = float("inf"), []
    for _ in range(repeats):
        hit = make()
        t0 = time.perf_counter()
        hits = [hit(p) for p in prompts]
        best = min(best, (time.perf_counter() - t0) / len(prompts))
    return best, hits


def main() -> None:
    rows = []
    for name, tr in (
        ("sample trace (24 req)", load_trace(SAMPLE)),
        ("synthetic (300 req × 4096 tok)", synthetic()),
        ("synthetic (400 req × 8192 tok)", synthetic(400, 16)),
    ):
        prompts = [w.text for w in trace_items(tr)]
        t_old, h_old = measure(prompts, old_cache)
        t_new, h_new = measure(prompts, lambda: PrefixCache(CACHE_PAGE_CHARS).hit_and_insert)
        assert h_old == h_new, "the two caches disagree"
        rows.append((name, t_old * 1e3, t_new * 1e3, t_old / t_new, sum(h_new) // 4))
    print(
        f"{'workload':34} {'list scan ms/req':>17} {'page keys ms/req':>17} {'ratio':>7} {'hit tokens':>11}"
    )
    for name, a, b, r, h in rows:
        print(f"{name:34} {a:17.3f} {b:17.3f} {r:6.1f}x {h:11d}")


if __name__ == "__main__":
    main()

"""The tuning lab on the simulator (issue 27): does the optimizer find the simulator's true best setting in a
third of the grid's relaunches, and do two workers sharing one study halve the wall time? A Markdown table.

    python benchmarks/lab.py [--seeds 10] [--skip-real]

1. The landscape (sim/landscape.py): the true best of the demo grid (budget x top-k x block size, 72 points)
   at each concurrency, against the no-speculation baseline, and the crossover.
2. The search, 10 seeds per concurrency: the optimizer's real loop (sweep/workers.py, sweep/optimizer.py,
   Optuna) on the landscape function with modelled noise (sweep/modelled.py: 2 % per window, 3 windows a
   point), 24 relaunches (a third of 72), pruning on; a hit is a best point whose TRUE value is within 2 %
   of the true best. Random search at the same budget for comparison. Each search twice: with the robust
   final pick (the last 3 of the 24 relaunches re-measure the top candidates, the pick is the best mean:
   sweep/optimizer.py, what real sweeps do) and with the single best measurement of 24 explored points
   (the pick before it), side by side.
3. One study, one or two workers (modelled relaunch time, SQLite study): wall time and points run twice.
4. Real sweeps end to end (`ddtree-tui sweep --strategy tpe`, child processes): the demo's simulated
   ddtree service and a second one like it, relaunched per point, with one worker and with two.
Every row says whether it is modelled or measured. Nothing here is a GPU measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

from ddtree_tui.sim import landscape as L
from ddtree_tui.sweep import optimizer as opt
from ddtree_tui.sweep import study as sy
from ddtree_tui.sweep.modelled import ModelledEvaluator
from ddtree_tui.sweep.workers import run_workers

ROOT = Path(__file__).resolve().parent.parent
LEVELS = [1, 2, 4, 8, 16, 32, 64, 128]
SEARCH_LEVELS = [1, 4, 8, 16, 32]
NOISE = 0.02
WINDOWS = 3


def fmt(o: dict[str, str]) -> str:
    return f"b={o['budget']} k={o['env.SGLANG_DDTREE_MAX_TOPK']} block={o['block_size']}"


def landscape_rows() -> list[str]:
    base = L.baseline_of(L.DEMO_BASE)
    rows = ["| c | true best (budget, top-k, block) | tok/s per request | baseline tok/s | speedup |",
            "|---|---|---|---|---|"]  # fmt: skip
    for c in LEVELS:
        o, v = L.optimum(L.DEMO_BASE, L.DEMO_DIMS, c)
        b = L.value(L.expected(base, c), "tok_s")
        rows.append(f"| {c} | {fmt(o)} | {v:.1f} | {b:.1f} | {v / b:.2f}x |")
    cross = L.crossover(L.DEMO_BASE, L.DEMO_DIMS, LEVELS)
    rows.append(f"\nCrossover (first level where the best setting no longer beats the baseline): c={cross}")
    return rows


async def search_once(
    seed: int, c: int, sampler: str, budget: int, robust: bool = True
) -> tuple[float, int, int, int]:
    """(true value of the point found / true best, relaunches, pruned, re-measures) for one seed; `robust`
    False: no re-measures, the single best measurement is the pick (the pick before the robust one)."""
    space = opt.Space(dims=L.DEMO_DIMS)
    if sampler == "random":
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed), direction="maximize")
    else:
        study = sy.open_study(f"lab-{seed}", sy.MEMORY, sampler, space.grid(), ["maximize"], seed, prune=True)
    ev = ModelledEvaluator(L.DEMO_BASE, [c], noise=NOISE, windows=WINDOWS, seed=seed)
    run = await run_workers(
        study, space, ["tok_s"], ev, ["w"], budget=budget, remeasure=None if robust else 0
    )
    best = opt.best_params(study, space)  # with no re-measures: the single best measurement
    _o, truth = L.optimum(L.DEMO_BASE, L.DEMO_DIMS, c)
    found = ev.truth(best, c).tok_s if best else 0.0
    pruned = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.PRUNED,)))
    return found / truth, run.relaunches, pruned, opt.remeasures(study)


def search_rows(seeds: int, first: int = 0) -> list[str]:
    grid = len(L.grid(L.DEMO_DIMS))
    budget = grid // 3
    picks = (("mean after re-measures", True), ("single best (before)", False))
    rows = [f"| c | strategy | final pick | relaunches (grid: {grid}) | of them re-measures | hits within 2 % "
            f"({seeds} seeds) | median found/best | worst found/best | pruned (mean) |",
            "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    hits: dict[tuple[int, str, bool], int] = {}
    for c in SEARCH_LEVELS:
        for sampler in ("tpe", "random"):
            for label, robust in picks:
                res = [
                    asyncio.run(search_once(s, c, sampler, budget, robust))
                    for s in range(first, first + seeds)
                ]
                ratios = [r[0] for r in res]
                hits[c, sampler, robust] = n = sum(1 for r in ratios if r >= 0.98)
                rel = statistics.fmean(r[1] for r in res)
                again = statistics.fmean(r[3] for r in res)
                pr = statistics.fmean(r[2] for r in res)
                rows.append(f"| {c} | {sampler} | {label} | {rel:.0f} | {again:.0f} | {n}/{seeds} | "
                            f"{statistics.median(ratios):.3f} | {min(ratios):.3f} | {pr:.1f} |")  # fmt: skip
    rows += ["", "Hits within 2 %, robust pick vs single best (same seeds, same budget):", "",
             "| c | tpe robust | tpe before | random robust | random before |", "|---|---|---|---|---|"]  # fmt: skip
    for c in SEARCH_LEVELS:
        rows.append(f"| {c} | " + " | ".join(f"{hits[c, sm, rb]}/{seeds}" for sm in ("tpe", "random")
                                             for rb in (True, False)) + " |")  # fmt: skip
    tot = {k: sum(hits[c, k[0], k[1]] for c in SEARCH_LEVELS) for k in ((sm, rb) for sm in ("tpe", "random")
                                                                          for rb in (True, False))}  # fmt: skip
    n_all = seeds * len(SEARCH_LEVELS)
    rows.append(f"| all | {tot['tpe', True]}/{n_all} | {tot['tpe', False]}/{n_all} | {tot['random', True]}/{n_all} "
                f"| {tot['random', False]}/{n_all} |")  # fmt: skip
    return rows


async def parallel_once(workers: list[str], relaunch_s: float, tmp: Path) -> tuple[float, int, int, int, int]:
    """(wall s, relaunches, distinct points, re-measures, points relaunched twice by accident) with `workers`
    sharing one study."""
    space = opt.Space(dims=L.DEMO_DIMS)
    url = f"sqlite:///{tmp / f'study-{len(workers)}.db'}"
    study = sy.open_study("lab-parallel", url, "tpe", space.grid(), ["maximize"], 0, prune=False)
    ev = ModelledEvaluator(L.DEMO_BASE, [1], noise=NOISE, windows=WINDOWS, relaunch_s=relaunch_s)
    t0 = time.monotonic()
    run = await run_workers(study, space, ["tok_s"], ev, workers, budget=24)
    wall = time.monotonic() - t0
    keys = [k for _w, k in ev.calls]
    again = opt.remeasures(study)  # top candidates measured again on purpose (the robust final pick)
    return wall, run.relaunches, len(set(keys)), again, len(keys) - len(set(keys)) - again


def parallel_rows(relaunch_s: float) -> list[str]:
    rows = ["| workers | wall (s) | relaunches | distinct points | of them re-measures (on purpose) | "
            "points run twice otherwise | wall vs 1 worker |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        one = asyncio.run(parallel_once(["a"], relaunch_s, Path(d)))
        two = asyncio.run(parallel_once(["a", "b"], relaunch_s, Path(d)))
    for n, r in ((1, one), (2, two)):
        rows.append(f"| {n} | {r[0]:.1f} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[0] / one[0]:.2f} |")
    return rows


# --- real sweeps through the demo's simulated services -----------------------------------------------------

REAL_DIMS = {"budget": ["4", "8", "16", "32"], "env.SGLANG_DDTREE_MAX_TOPK": ["1", "2", "4"],
             "block_size": ["8", "16"]}  # fmt: skip


def demo_profile(tmp: Path) -> Path:
    """The shipped demo with its own workdir and free ports, a fast simulator, and a second ddtree service
    like the first (the second worker: same model, another "GPU")."""
    sys.path.insert(0, str(ROOT))
    from tests.util import free_port

    text = (ROOT / "hostprofiles" / "local-demo.toml").read_text()
    text = text.replace('workdir = ".ddtree/demo"', f"workdir = {json.dumps(str(tmp / 'wd'))}")
    text = text.replace("port = 31010", f"port = {free_port()}").replace(
        "port = 31011", f"port = {free_port()}"
    )
    # a relaunch costs what a model load costs (minutes on a GPU): the simulated service waits 8 s before
    # ready, so the run is bound by relaunches as on real hosts, not by this machine's CPU
    text = text.replace("decode_rate = 40.5", "decode_rate = 400.0").replace(
        "load_time = 2.0", "load_time = 8.0"
    )
    second = text[text.index('[[service]]\nname = "ddtree-shadow"') : text.index("# A ready-made")]
    second = second.replace('name = "ddtree-shadow"', 'name = "ddtree-b"')
    second = second.replace("gpus = [0]", "gpus = [1]")
    import re

    second = re.sub(r"port = \d+", f"port = {free_port()}", second)
    text = text.replace("# A ready-made", second + "# A ready-made", 1)
    p = tmp / "local-demo.toml"
    p.write_text(text)
    return p


def real_sweep(profile: Path, out: Path, workers: list[str], trials: int) -> dict[str, object]:
    argv = [sys.executable, "-m", "ddtree_tui.cli", "--profile", str(profile), "sweep", "local/ddtree-shadow",
            "--set", "mode=tree", *[a for k, v in REAL_DIMS.items() for a in ("--set", f"{k}={','.join(v)}")],
            "--strategy", "tpe", "--trials", str(trials), "--seed", "0", "--repeats", "2", "--warmup", "1",
            "--max-new-tokens", "64", "--out", str(out), "--no-telemetry", "--no-prune",
            *[a for w in workers for a in ("--worker", w)]]  # fmt: skip
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=out.parent, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "DDTREE_TUI_HOLDS_DIR": str(out.parent / "holds")})  # fmt: skip
    wall = time.monotonic() - t0
    state = json.loads((out / "sweep.json").read_text())
    done = [q for q in state["points"] if q["status"] == "done"]
    keys = [json.dumps(q["overrides"], sort_keys=True) for q in done]
    counts: dict[str, int] = {}
    for q in state["points"]:
        counts[q["status"]] = counts.get(q["status"], 0) + 1
    odd = [f"#{q['index']} {q['status']}: {q['error']}" for q in state["points"]
           if q["status"] not in ("done", "skipped")]  # fmt: skip
    return {"rc": p.returncode, "wall": wall, "done": done, "twice": len(keys) - len(set(keys)),
            "counts": counts, "odd": odd,
            "study": state.get("study") or {}, "stderr": p.stderr[-2000:]}  # fmt: skip


def real_rows(trials: int) -> list[str]:
    grid = 1
    for v in REAL_DIMS.values():
        grid *= len(v)
    base = L.DEMO_BASE.model_copy(update={"batch_slowdown": False, "decode_rate": 400.0})
    dims = {"mode": ["tree"], **REAL_DIMS}
    scored = sorted(((L.value(L.expected(L.config_for(base, o), 1), "tok_s"), o) for o in L.grid(dims)),
                    key=lambda t: -t[0])  # fmt: skip
    truth = scored[0][0]
    rows = [f"| workers | wall (s, measured) | relaunches | configs measured (grid {grid}) | points run twice | "
            "per worker (latest) | best found | its true value / true best | true rank |",
            "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    walls: list[float] = []
    notes: list[tuple[int, str]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        profile = demo_profile(tmp)
        for workers in ([], ["local/ddtree-b"]):
            out = tmp / f"out-{len(workers) + 1}"
            r = real_sweep(profile, out, workers, trials)
            if r["rc"] != 0:
                rows.append(
                    f"| {len(workers) + 1} | failed (exit {r['rc']}) | | | | | | | |\n\n```\n{r['stderr']}\n```"
                )
                continue
            done = r["done"]
            assert isinstance(done, list)
            per: dict[str, int] = {}
            for q in done:
                per[q["worker"]] = per.get(q["worker"], 0) + 1
            best = (r["study"] or {}).get("best") if isinstance(r["study"], dict) else None
            if best:
                full = {"mode": "tree", **best}
                val = L.value(L.expected(L.config_for(base, full), 1), "tok_s")
                rank = 1 + sum(1 for v, _o in scored if v > val + 1e-9)
                found = (
                    f"b={best['budget']} k={best['env.SGLANG_DDTREE_MAX_TOPK']} block={best['block_size']}"
                )
                ratio = f"{val / truth:.3f}"
            else:
                found, ratio, rank = "-", "-", 0
            walls.append(float(r["wall"]))  # type: ignore[arg-type]
            notes += [(len(workers) + 1, str(o)) for o in r["odd"]]  # type: ignore[attr-defined]
            shown = ", ".join(f"{w}: {n}" for w, n in sorted(per.items()))
            rel = r["study"].get("relaunches", "-") if isinstance(r["study"], dict) else "-"
            rows.append(f"| {len(workers) + 1} | {r['wall']:.1f} | {rel} | {len(done)} | {r['twice']} | {shown} | {found} "
                        f"| {ratio} | {rank} |")  # fmt: skip
    rows += [f"- {n} worker(s), not measured: {o}" for n, o in notes]
    if len(walls) == 2:
        rows.append(
            f"\nTwo workers / one worker wall time (measured, real relaunches): {walls[1] / walls[0]:.2f}"
        )
    top = scored[0][1]
    rows.append(f"True best of this grid at c=1 (landscape): b={top['budget']} k={top['env.SGLANG_DDTREE_MAX_TOPK']} "
                f"block={top['block_size']}")  # fmt: skip
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="section 2's seeds start here (a held-out set)")
    ap.add_argument("--relaunch-s", type=float, default=2.0, help="modelled relaunch time for section 3")
    ap.add_argument("--real-trials", type=int, default=8, help="configs each real sweep measures")
    ap.add_argument("--skip-real", action="store_true", help="leave out section 4 (the real sweeps)")
    ap.add_argument("--only-real", action="store_true", help="section 4 only")
    a = ap.parse_args()
    print(f"# Tuning lab on the simulator ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)\n")
    if a.only_real:
        print("\n".join(real_rows(a.real_trials)), flush=True)
        return 0
    print("## 1. The landscape (modelled: sim/landscape.py, the simulator's own model)\n")
    print("\n".join(landscape_rows()))
    print(f"\n## 2. Search, {a.seeds} seeds per concurrency from seed {a.first_seed} (modelled noise "
          f"{NOISE:.0%} per window, {WINDOWS} windows)\n")  # fmt: skip
    print("\n".join(search_rows(a.seeds, a.first_seed)), flush=True)
    print(f"\n## 3. One study, one or two workers (modelled relaunch {a.relaunch_s:g} s, SQLite study)\n")
    print("\n".join(parallel_rows(a.relaunch_s)), flush=True)
    if not a.skip_real:
        print("\n## 4. Real sweeps through the demo's simulated services (measured, child processes)\n")
        print("\n".join(real_rows(a.real_trials)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

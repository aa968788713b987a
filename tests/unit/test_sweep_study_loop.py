"""The optimizer's loop (sweep/workers.py + sweep/optimizer.py) on the landscape function with modelled
noise (sweep/modelled.py), through a real SQLite study: seeded, no point relaunched twice, a host lost
mid-point fails its trial and another worker measures the point, pruning is recorded with its reason,
grid covers every point, a reopened study continues where it stopped, and the final pick is the best mean
after the last relaunches re-measured the top candidates (not the single luckiest measurement)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ddtree_tui.sim import landscape as L
from ddtree_tui.sweep import optimizer as opt
from ddtree_tui.sweep import study as sy
from ddtree_tui.sweep.modelled import ModelledEvaluator
from ddtree_tui.sweep.workers import Outcome, Report, run_workers

SMALL = {"budget": ["4", "8", "16", "32"], "env.SGLANG_DDTREE_MAX_TOPK": ["1", "2", "4"]}


def _study(tmp: Path | None, strategy: str = "tpe", seed: int = 0, prune: bool = False) -> optuna.Study:
    """The study in SQLite under `tmp` (a real database: resume), or in memory (None: fast)."""
    space = opt.Space(dims=SMALL)
    url = f"sqlite:///{tmp / 'study.db'}" if tmp is not None else sy.MEMORY
    return sy.open_study("t", url, strategy, space.grid(), ["maximize"], seed, prune)


@pytest.mark.slow
def test_seeded_no_duplicates_and_resume(tmp_path: Path) -> None:
    space = opt.Space(dims=SMALL)
    ev = ModelledEvaluator(L.DEMO_BASE, [1], seed=1)
    run = asyncio.run(run_workers(_study(tmp_path), space, ["tok_s"], ev, ["a"], budget=5))
    assert run.relaunches == len(ev.calls) == 5
    assert len({k for _w, k in ev.calls}) == 5  # no point twice
    # reopened (resume): the 5 measured points stay measured, 3 more are chosen, none of them again
    # (no re-measures of top candidates here: this is about exploring on, test_the_pick_... is about those)
    again = ModelledEvaluator(L.DEMO_BASE, [1], seed=1)
    study = _study(tmp_path)
    asyncio.run(run_workers(study, space, ["tok_s"], again, ["a"], budget=8, remeasure=0))
    assert len(again.calls) == 3 and not {k for _w, k in again.calls} & {k for _w, k in ev.calls}
    assert len(opt.measured(study)) == 8
    # the same seed chooses the same first points
    ev2 = ModelledEvaluator(L.DEMO_BASE, [1], seed=1)
    asyncio.run(run_workers(_study(None, seed=0), space, ["tok_s"], ev2, ["a"], budget=5))
    assert ev2.calls == ev.calls


def test_grid_covers_every_point_once_with_two_workers(tmp_path: Path) -> None:
    space = opt.Space(dims=SMALL)
    # a relaunch takes time: both workers get points
    ev = ModelledEvaluator(L.DEMO_BASE, [1], relaunch_s=0.01)
    study = _study(None, "grid")
    run = asyncio.run(run_workers(study, space, ["tok_s"], ev, ["a", "b"]))
    keys = [k for _w, k in ev.calls]
    assert len(keys) == len(set(keys)) == space.size == 12
    assert {w for w, _k in ev.calls} == {"a", "b"} and run.relaunches == 12
    assert opt.best_params(study, space) is not None


def test_lost_host_fails_the_trial_and_another_worker_measures_it(tmp_path: Path) -> None:
    space = opt.Space(dims=SMALL)
    ev = ModelledEvaluator(L.DEMO_BASE, [1], lose={"b": 1}, relaunch_s=0.01)
    study = _study(None)
    run = asyncio.run(run_workers(study, space, ["tok_s"], ev, ["a", "b"], budget=6))
    lost_key = next(k for w, k in ev.calls if w == "b")
    assert [w for w, k in ev.calls if k == lost_key] == ["b", "a"]  # retried elsewhere
    failed = study.get_trials(states=(TrialState.FAIL,))
    assert len(failed) == 1 and "connection lost" in failed[0].user_attrs[opt.REASON]
    assert next(s for s in run.workers if s.worker == "b").lost and run.retries == 1
    done = [opt.key_of(space.values(t.params)) for t in opt.measured(study)]
    assert len(done) == len(set(done)) == 6 and lost_key in done


def test_pruning_is_recorded_with_its_reason(tmp_path: Path) -> None:
    space = opt.Space(dims=SMALL)
    ev = ModelledEvaluator(L.DEMO_BASE, [1], windows=4)
    study = _study(None, "grid", prune=True)
    asyncio.run(run_workers(study, space, ["tok_s"], ev, ["a"]))
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    assert pruned and all("median rule" in t.user_attrs[opt.REASON] for t in pruned)
    # the best point is never the one pruned
    best = L.optimum(L.DEMO_BASE, SMALL, 1)[0]
    assert opt.key_of(best) not in {opt.key_of(space.values(t.params)) for t in pruned}


def test_nsga2_pareto_front(tmp_path: Path) -> None:
    space = opt.Space(dims=SMALL)
    objs = ["tok_s", "throughput", "ttft_p90"]
    ev = ModelledEvaluator(L.DEMO_BASE, [1, 8], objs)
    study = sy.open_study("p", sy.MEMORY, "nsga2", space.grid(),
                          opt.directions(objs), 0)  # fmt: skip
    asyncio.run(run_workers(study, space, objs, ev, ["a"], budget=8))
    front = opt.pareto_params(study, space)
    assert front and len(opt.measured(study)) == 8


class Scripted:
    """An Evaluator whose every measurement is given: the value of point x on its n-th relaunch."""

    def __init__(self, script: dict[str, list[float]], relaunch_s: float = 0.0) -> None:
        self.script = script
        self.relaunch_s = relaunch_s
        self.calls: list[str] = []

    async def evaluate(self, worker: str, trial: int, overrides: dict[str, str], report: Report) -> Outcome:
        x = overrides["x"]
        n = sum(1 for c in self.calls if c == x)
        self.calls.append(x)
        v = self.script[x][n]
        await asyncio.sleep(self.relaunch_s)
        await report(0, v)
        return Outcome(kind="done", values={"tok_s": v})


# x=3 is the true best (100) and x=4 a close second (98) whose first measurement is lucky (103)
SCRIPT = {"1": [90.0], "2": [95.0, 94.0], "3": [100.0, 100.0], "4": [103.0, 95.0], "5": [80.0], "6": [85.0]}


def _scripted(
    remeasure: int | None, workers: tuple[str, ...] = ("a",)
) -> tuple[Scripted, optuna.Study, opt.Space]:
    space = opt.Space(dims={"x": list(SCRIPT)})
    study = sy.open_study("s", sy.MEMORY, "grid", space.grid(), ["maximize"], 0, prune=False)
    ev = Scripted(SCRIPT, relaunch_s=0.01 if len(workers) > 1 else 0.0)
    asyncio.run(run_workers(study, space, ["tok_s"], ev, list(workers), budget=16, remeasure=remeasure))
    return ev, study, space


def test_the_pick_is_the_best_mean_after_re_measuring_the_top_candidates() -> None:
    # budget 16 -> 2 re-measures (optimizer.remeasure_count); the grid of 6 is explored first
    ev, study, space = _scripted(None)
    assert opt.remeasure_count(16, 1) == 2 and len(ev.calls) == 8 == opt.relaunches(study)
    # the lucky x=4 is measured again first (best mean so far), then x=3 (now the best measured once)
    assert ev.calls[6:] == ["4", "3"]
    again = [t for t in study.get_trials() if opt.REMEASURE_OF in t.user_attrs]
    assert len(again) == opt.remeasures(study) == 2 and all(t.state == TrialState.COMPLETE for t in again)
    assert opt.best_params(study, space) == {"x": "3"}
    assert [(p.key, p.mean) for p in opt.pooled(study, space)[:2]] == [
        ('{"x": "3"}', 100.0),
        ('{"x": "4"}', 99.0),
    ]
    # without re-measures the single luckiest measurement wins: the second-best point
    ev0, study0, space0 = _scripted(0)
    assert len(ev0.calls) == 6 and opt.best_params(study0, space0) == {"x": "4"}


def test_re_measures_fit_in_the_budget_and_only_for_one_objective() -> None:
    assert [opt.remeasure_count(b, 1) for b in (None, 5, 8, 24)] == [0, 0, 1, 3]
    assert opt.remeasure_count(24, 3) == 0  # a Pareto front has no one best to confirm
    space = opt.Space(dims=L.DEMO_DIMS)
    ev = ModelledEvaluator(L.DEMO_BASE, [16], noise=0.02, windows=3, seed=0)
    study = sy.open_study("r", sy.MEMORY, "tpe", space.grid(), ["maximize"], 0, prune=True)
    run = asyncio.run(run_workers(study, space, ["tok_s"], ev, ["a"], budget=24))
    assert run.relaunches == len(ev.calls) == 24 and opt.remeasures(study) == 3
    assert len(opt.judged_keys(study, space)) == 21  # 21 points explored, 3 of them measured again
    pruned_again = study.get_trials(states=(TrialState.PRUNED,))
    assert not [t for t in pruned_again if opt.REMEASURE_OF in t.user_attrs]  # a re-measure runs to the end


def test_two_workers_re_measure_different_candidates() -> None:
    # a re-measure running on one worker counts for its point: the other worker takes the next candidate
    ev, study, space = _scripted(None, ("a", "b"))
    assert len(ev.calls) == 8 and sorted(ev.calls[6:]) == ["3", "4"]
    assert opt.best_params(study, space) == {"x": "3"}

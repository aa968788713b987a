"""The optimizer's loop (sweep/workers.py + sweep/optimizer.py) on the landscape function with modelled
noise (sweep/modelled.py), through a real SQLite study: seeded, no point relaunched twice, a host lost
mid-point fails its trial and another worker measures the point, pruning is recorded with its reason,
grid covers every point, a reopened study continues where it stopped."""

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
from ddtree_tui.sweep.workers import run_workers

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
    again = ModelledEvaluator(L.DEMO_BASE, [1], seed=1)
    study = _study(tmp_path)
    asyncio.run(run_workers(study, space, ["tok_s"], again, ["a"], budget=8))
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

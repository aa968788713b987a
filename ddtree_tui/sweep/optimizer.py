"""Which point to relaunch next, asked of the study: the search space (the sweep's dimensions as categorical
parameters), the objectives and their directions, and the rule that no point is relaunched twice (a
suggestion equal to a point already measured, pruned, being measured or refused is answered from the study
without a relaunch, and another is asked for). Counting relaunches is what the budget (`--trials`) limits.

The final pick is robust to measurement noise: the last few relaunches of a single-objective budget
(`remeasure_count`) re-measure the current top candidates (each a real relaunch, counted as one), and the
best point is the one with the best mean over all of its measurements, not the single luckiest one (on a
flat top, 2 % noise per window lets a point 2-3 % worse win one measurement; benchmarks/lab.py).

Pure Optuna bookkeeping: no Fleet, no clock; sweep/workers.py runs the loop around it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState
from pydantic import BaseModel

from ddtree_tui.sweep.study import quiet

# user attributes of a trial
DUPLICATE_OF = "duplicate_of"  # answered from that trial's result: no relaunch
RETRY_OF = "retry_of"  # enqueued again after its worker's host was lost
RELAUNCHED = "relaunched"  # a service was relaunched for it (counts against the budget)
WORKER = "worker"  # the service (HOST/SVC) that measured it
REASON = "reason"  # why it failed or was pruned
REFUSED = "refused"  # the config itself failed (did not start, rejected): never asked for again
REMEASURE_OF = "remeasure_of"  # a measured point relaunched and measured again (the first trial's number)
REMEASURE_EVERY = 8  # one relaunch in 8 of a single-objective budget re-measures top candidates (3 of 24)
REMEASURE_MIN_BUDGET = 8  # a smaller budget explores only
TOP_K = 3  # the candidates re-measured: the best 3 by their mean so far
MAX_DUPLICATES = 64  # suggestions in a row that were all duplicates: the sampler has converged, stop

# objective name -> (direction, the Metrics field it reads)
OBJECTIVES: dict[str, tuple[str, str]] = {
    "tok_s": ("maximize", "tok_s"),
    "throughput": ("maximize", "output_throughput"),
    "goodput": ("maximize", "goodput"),
    "ttft": ("minimize", "ttft_p90"),
    "ttft_p90": ("minimize", "ttft_p90"),
}
PARETO_DEFAULT = ["tok_s", "throughput", "ttft_p90"]


def _number(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


class Space(BaseModel):
    """The sweep's dimensions as the study's parameters. A dimension whose values are all numbers is an
    ordered parameter (the index of its value in ascending order), so TPE's density estimate sees that
    budget 12 lies between 8 and 16; any other dimension is categorical. Points are always named by the
    --set text of their values (`values`, `key_of`)."""

    dims: dict[str, list[str]]

    @property
    def size(self) -> int:
        n = 1
        for v in self.dims.values():
            n *= len(v)
        return n

    def ordered(self, key: str) -> list[str] | None:
        """The values of a numeric dimension in ascending order (None: categorical)."""
        vals = self.dims[key]
        nums = [_number(v) for v in vals]
        if len(vals) < 2 or any(n is None for n in nums):
            return None
        return [v for _n, v in sorted(zip(nums, vals, strict=True), key=lambda t: t[0] or 0.0)]

    def distributions(self) -> dict[str, BaseDistribution]:
        out: dict[str, BaseDistribution] = {}
        for k, v in self.dims.items():
            order = self.ordered(k)
            out[k] = IntDistribution(0, len(v) - 1) if order is not None else CategoricalDistribution(list(v))
        return out

    def grid(self) -> dict[str, list[object]]:
        """GridSampler's search space, in the study's own encoding."""
        return {
            k: (list(range(len(v))) if self.ordered(k) is not None else list(v)) for k, v in self.dims.items()
        }

    def values(self, params: Mapping[str, object]) -> dict[str, str]:
        """A trial's parameters as the point's --set values."""
        out: dict[str, str] = {}
        for k, p in params.items():
            order = self.ordered(k) if k in self.dims else None
            out[k] = order[p] if order is not None and isinstance(p, int) else str(p)
        return out

    def params(self, values: Mapping[str, str]) -> dict[str, object]:
        """A point's --set values in the study's encoding (for enqueueing it)."""
        out: dict[str, object] = {}
        for k, v in values.items():
            order = self.ordered(k)
            out[k] = order.index(v) if order is not None else v
        return out


def key_of(params: Mapping[str, object]) -> str:
    """One point's identity: its --set values, sorted."""
    return json.dumps({k: str(v) for k, v in params.items()}, sort_keys=True)


def directions(objectives: Sequence[str]) -> list[str]:
    out = []
    for o in objectives:
        if o not in OBJECTIVES:
            raise ValueError(f"objective {o!r}: not one of {', '.join(OBJECTIVES)}")
        out.append(OBJECTIVES[o][0])
    return out


def _judged(t: FrozenTrial) -> bool:
    """A trial that stands for its point: measured, pruned, being measured, or a config that cannot run."""
    if DUPLICATE_OF in t.user_attrs:
        return False
    if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
        return True
    return t.state == TrialState.FAIL and bool(t.user_attrs.get(REFUSED))


def relaunches(study: optuna.Study) -> int:
    """Services relaunched for this study so far (finished or running), retries included."""
    return sum(1 for t in study.get_trials(deepcopy=False) if t.user_attrs.get(RELAUNCHED))


def judged_keys(study: optuna.Study, space: Space) -> dict[str, FrozenTrial]:
    out: dict[str, FrozenTrial] = {}
    for t in study.get_trials(deepcopy=False):
        if _judged(t):
            out.setdefault(key_of(space.values(t.params)), t)
    return out


def ask(study: optuna.Study, space: Space, worker: str) -> optuna.Trial | None:
    """The next point to relaunch, or None when every point is judged or the sampler keeps suggesting
    judged ones. A duplicate suggestion is told the original's result (or failed, when the original is
    still running), so the sampler learns from it without a relaunch."""
    dist = space.distributions()
    for _ in range(MAX_DUPLICATES):
        judged = judged_keys(study, space)
        if len(judged) >= space.size and not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return None
        with quiet():
            trial = study.ask(dist)
        k = key_of(space.values(trial.params))
        if REMEASURE_OF in trial.user_attrs:  # enqueued on purpose (enqueue_remeasure): a relaunch
            trial.set_user_attr(WORKER, worker)
            trial.set_user_attr(RELAUNCHED, True)
            return trial
        orig = judged.get(k)
        if orig is None:
            trial.set_user_attr(WORKER, worker)
            trial.set_user_attr(RELAUNCHED, True)
            return trial
        trial.set_user_attr(DUPLICATE_OF, orig.number)
        if orig.state == TrialState.COMPLETE and orig.values is not None:
            study.tell(trial, list(orig.values))
        elif orig.state == TrialState.PRUNED:
            study.tell(trial, state=TrialState.PRUNED)
        else:  # running elsewhere, or a refused config
            study.tell(trial, state=TrialState.FAIL)
    return None


def fail(study: optuna.Study, trial: optuna.Trial, reason: str, *, refused: bool, retry: bool) -> None:
    """The trial failed: its config refused (never asked again), or its host was lost (`retry`: enqueued
    for another worker)."""
    trial.set_user_attr(REASON, reason)
    if refused:
        trial.set_user_attr(REFUSED, True)
    study.tell(trial, state=TrialState.FAIL)
    if retry:
        enqueue_retry(study, dict(trial.params), trial.number)


def enqueue_retry(study: optuna.Study, params: dict[str, object], number: int) -> None:
    """Enqueue the point again, once (Optuna's skip_if_exists would see the failed trial itself)."""
    k = key_of(params)
    for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        if key_of(t.system_attrs.get("fixed_params", t.params)) == k:
            return
    study.enqueue_trial(params, user_attrs={RETRY_OF: number})


def prune(study: optuna.Study, trial: optuna.Trial, reason: str) -> None:
    trial.set_user_attr(REASON, reason)
    study.tell(trial, state=TrialState.PRUNED)


def complete(study: optuna.Study, trial: optuna.Trial, values: Sequence[float]) -> None:
    study.tell(trial, list(values))


def fail_running(study: optuna.Study) -> list[int]:
    """On resume of a study only this sweep's process uses: its RUNNING trials were cut off with it; they
    are failed and enqueued again (the points they stood for are measured again from scratch)."""
    out = []
    storage = study._storage
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        storage.set_trial_user_attr(t._trial_id, REASON, "interrupted (the sweep stopped mid-point)")
        storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        enqueue_retry(study, dict(t.params), t.number)
        out.append(t.number)
    return out


def measured(study: optuna.Study) -> list[FrozenTrial]:
    """The trials that were relaunched and measured to the end (duplicates left out)."""
    return [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if DUPLICATE_OF not in t.user_attrs
    ]


def remeasure_count(budget: int | None, n_objectives: int) -> int:
    """How many of a budget's relaunches re-measure top candidates (single objective only: a Pareto front
    has no one best to confirm)."""
    if budget is None or n_objectives != 1 or budget < REMEASURE_MIN_BUDGET:
        return 0
    return budget // REMEASURE_EVERY


def remeasures(study: optuna.Study) -> int:
    """Re-measures spent: measured, pruned or being measured (one cut off by a lost host is not)."""
    states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
    return sum(1 for t in study.get_trials(deepcopy=False, states=states) if REMEASURE_OF in t.user_attrs)


class Pooled(BaseModel):
    """One point's measurements together: its mean decides the pick."""

    key: str
    params: dict[str, object]
    values: list[float]
    first: int  # the trial number that first measured it

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)


def pooled(study: optuna.Study, space: Space) -> list[Pooled]:
    """Every measured point with all of its measurements (first trial and re-measures), best mean first."""
    by: dict[str, Pooled] = {}
    for t in measured(study):
        if t.value is None:
            continue
        k = key_of(space.values(t.params))
        p = by.setdefault(k, Pooled(key=k, params=dict(t.params), values=[], first=t.number))
        p.values.append(float(t.value))
    sign = 1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else -1.0
    return sorted(by.values(), key=lambda p: (-sign * p.mean, p.first))


def next_remeasure(study: optuna.Study, space: Space, k: int = TOP_K) -> Pooled | None:
    """The candidate to measure again: of the best `k` by mean so far, the one measured least often, a
    re-measure running on another worker counted (the better one on a tie). None while nothing is measured,
    or while one is already waiting."""
    if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        return None
    top = pooled(study, space)[:k]
    if not top:
        return None
    running: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if REMEASURE_OF in t.user_attrs:
            key = key_of(space.values(t.params))
            running[key] = running.get(key, 0) + 1
    return min(top, key=lambda p: len(p.values) + running.get(p.key, 0))  # stable: the better mean on a tie


def enqueue_remeasure(study: optuna.Study, p: Pooled) -> None:
    study.enqueue_trial(p.params, user_attrs={REMEASURE_OF: p.first})


def best_params(study: optuna.Study, space: Space) -> dict[str, str] | None:
    """Single objective: the point with the best mean over all of its measurements (None: nothing
    measured)."""
    ranked = pooled(study, space)
    return space.values(ranked[0].params) if ranked else None


def pareto_params(study: optuna.Study, space: Space) -> list[dict[str, str]]:
    """Multi-objective: the settings of the Pareto-front trials (each once)."""
    out: dict[str, dict[str, str]] = {}
    for t in study.best_trials:
        v = space.values(t.params)
        out.setdefault(key_of(v), v)
    return list(out.values())

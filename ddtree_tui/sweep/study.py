"""The sweep's Optuna study: where it is stored, which sampler and pruner it runs with, and how it is opened
again. The study is the search's state (resume = reopen it): SQLite in the sweep's directory by default
(`DIR/study.db`), or any database URL Optuna accepts (`--storage`), which is how several processes or
machines share one study. Heartbeats mark a trial whose worker died FAIL and enqueue it again.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal, cast

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage, RetryHeartbeatStaleTrialCallback

StudyStrategy = Literal["grid", "tpe", "nsga2"]
STUDY_STRATEGIES: tuple[str, ...] = ("tpe", "nsga2")  # grid runs through a study only with several workers
STUDY_FILE = "study.db"
# a worker writes a heartbeat this often while it measures; a RUNNING trial silent for GRACE is failed (its
# process died) and enqueued again for another worker (Optuna's RetryFailedTrialCallback)
HEARTBEAT_S = 10
GRACE_S = 60
MAX_RETRY = 2

optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep prints its own lines


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Optuna's warnings that the sweep knowingly goes past: multivariate TPE, constant liar and heartbeats
    are marked experimental, and ask/tell with heartbeats (what sweep/workers.py does on purpose: it beats
    while a point is measured) is warned about."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        yield


MEMORY = ":memory:"  # the lab's storage: nothing written (not resumable)


def default_storage(out: Path) -> str:
    """SQLite in the sweep's directory."""
    return f"sqlite:///{(Path(out) / STUDY_FILE).absolute()}"


_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*@")


def redact_url(url: str) -> str:
    """A database URL as it may be written: `user:secret@` -> `user:***@`."""
    return _PASSWORD.sub(r"\1***@", url)


class _Grid(optuna.samplers.GridSampler):
    """GridSampler without its end-of-grid `study.stop()` (which only works inside Study.optimize): the
    workers' loop ends by itself once every point is judged (optimizer.ask)."""

    def after_trial(
        self,
        study: optuna.Study,
        trial: optuna.trial.FrozenTrial,
        state: optuna.trial.TrialState,
        values: Sequence[float] | None,
    ) -> None:
        return None


def sampler_for(
    strategy: str, grid: dict[str, list[object]], seed: int, n_objectives: int
) -> optuna.samplers.BaseSampler:
    """grid: Optuna's GridSampler over the dimensions; tpe: TPE (multivariate, constant liar so parallel
    workers do not pile onto one point); nsga2: NSGA-II for a Pareto front. Seeded."""
    if strategy == "grid":
        return _Grid(grid, seed=seed)  # type: ignore[arg-type]
    if strategy == "tpe":
        size = 1
        for v in grid.values():
            size *= len(v)
        # 10 random points first on the lab's 72-point grid (fewer on small grids), 64 candidates per pick:
        # the best of four settings tried on benchmarks/lab.py's landscape (issue-27-lab.md)
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=max(4, min(10, size // 7)),
            n_ei_candidates=64,
            multivariate=True,
            group=True,
            constant_liar=True,
        )
    if strategy == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(12, n_objectives * 4)))
    raise ValueError(f"--strategy {strategy!r}: not an optimizer (grid, tpe, nsga2)")


def pruner_for(n_objectives: int, enabled: bool = True) -> optuna.pruners.BasePruner:
    """MedianPruner on the per-window values (single objective only: Optuna cannot prune multi-objective)."""
    if not enabled or n_objectives > 1:
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1, interval_steps=1)


def storage_for(url: str, heartbeat: bool = True) -> BaseStorage:
    """An RDB storage (SQLite, PostgreSQL, MySQL, ...) with heartbeats so a dead worker's trial is retried;
    MEMORY: in this process only."""
    if url == MEMORY:
        return InMemoryStorage()
    if heartbeat:
        return RDBStorage(
            url,
            heartbeat_interval=HEARTBEAT_S,
            grace_period=GRACE_S,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY),
        )
    return RDBStorage(url)


def open_study(
    name: str,
    url: str,
    strategy: str,
    grid: dict[str, list[object]],
    directions: Sequence[str],
    seed: int,
    prune: bool = True,
    heartbeat: bool = True,
) -> optuna.Study:
    """Create the study, or open it again when it exists (resume, or another worker joining)."""
    with quiet():
        return optuna.create_study(
            storage=storage_for(url, heartbeat),
            study_name=name,
            sampler=sampler_for(strategy, grid, seed, len(directions)),
            pruner=pruner_for(len(directions), prune),
            directions=cast("list[Literal['minimize', 'maximize']]", list(directions)),
            load_if_exists=True,
        )


def record_heartbeat(study: optuna.Study, trial: optuna.Trial) -> None:
    """This worker is still on `trial` (RDB storages with a heartbeat only)."""
    storage = study._storage
    if isinstance(storage, RDBStorage) and storage.get_heartbeat_interval() is not None:
        storage.record_heartbeat(trial._trial_id)


def fail_stale(study: optuna.Study) -> None:
    """Mark RUNNING trials whose worker stopped beating FAIL (and enqueue their retry)."""
    with quiet():
        optuna.storages.fail_stale_trials(study)

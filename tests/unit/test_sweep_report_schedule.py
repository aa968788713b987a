"""The sweep report's schedule part (report/sweep_schedule.py): the schedule table, bands and crossover with
the same figures as the text table, the crossover and trials charts, the fair arms section, and the
parameter importances: "n/a" without an Optuna study, Optuna's own figures (and trial states) with one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtree_tui.report.sweep import html_for_state
from ddtree_tui.sweep import results as rs
from ddtree_tui.sweep.state import FairnessRecord, GpuCheck
from tests.unit.test_sweep_schedule import state_of

SMALL = {"levels": [1, 4, 64], "grid": [(16, 2), (8, 2), (4, 1)]}


def small_state():  # type: ignore[no-untyped-def]
    s = state_of(0, noise=0.005, **SMALL)  # type: ignore[arg-type]
    for i, p in enumerate(s.points):
        p.finished_at = 1000.0 + 7 * i
        p.fairness = FairnessRecord(at=999.0 + 7 * i, flushed=True, gpus=[GpuCheck(index=0, temp_c=40 + i)])
    s.points[2].status, s.points[2].error = "failed", "crashed at start"
    s.points[3].fairness = FairnessRecord(
        at=1.0, flushed=False, flush_error="HTTP 400", flags=["prefix cache not flushed: HTTP 400"]
    )
    return s


def test_report_has_the_schedule_crossover_trials_fairness_and_na_importances(tmp_path: Path) -> None:
    s = small_state()
    res = rs.analyse(s)
    assert res.schedule is not None and res.schedule.crossover == 64
    out = tmp_path / "r.html"
    html_for_state(s, res, tmp_path, out)
    html = out.read_text()
    assert "<h2>Schedule per concurrency</h2>" in html and "<h3>Bands</h3>" in html
    c1 = res.schedule.levels[0]
    assert f"{c1.score:.1f}" in html and f"{c1.score:.1f}" in rs.table(res)  # one figure, both places
    assert "from c=64 on run the baseline" in html
    assert 'id="chart-sweep-crossover"' in html and 'id="chart-sweep-trials"' in html
    assert "the sweep&#x27;s own points (no Optuna study)" in html
    assert "complete (8)" in html and "failed (1)" in html
    assert "<h2>Parameter importances</h2>" in html and "n/a — no Optuna study" in html
    assert "<h2>Fair arms</h2>" in html and "flushed (POST /flush_cache) before 8 of 9 point" in html
    assert "#3" in html and "prefix cache not flushed: HTTP 400" in html
    assert "sweep apply DIR --schedule" in html


@pytest.mark.slow
def test_report_reads_optuna_trial_states_and_importances_when_the_sweep_has_a_study(tmp_path: Path) -> None:
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name="sweep", storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize",
        sampler=optuna.samplers.RandomSampler(seed=0),
    )  # fmt: skip
    for i in range(8):
        t = study.ask({"budget": optuna.distributions.CategoricalDistribution(["8", "16", "32"]),
                       "topk": optuna.distributions.CategoricalDistribution(["1", "2"])})  # fmt: skip
        if i == 5:
            study.tell(t, state=optuna.trial.TrialState.PRUNED)
        elif i == 6:
            study.tell(t, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(t, float(t.params["budget"]) + i)
    s = small_state()
    out = tmp_path / "r.html"
    html_for_state(s, rs.analyse(s), tmp_path, out)
    html = out.read_text()
    assert "from Optuna&#x27;s trial states" in html
    assert "complete (6)" in html and "pruned (1)" in html and "failed (1)" in html  # the legend, as SVG text
    assert "<th>parameter</th>" in html and "budget" in html and "n/a — no Optuna study" not in html

"""A study-driven sweep through the Fleet in this process: TPE chooses the points, two services of one host
measure them in parallel from one SQLite study, no config is relaunched twice, the unchosen points are
recorded as skipped, both services are put back; stopped mid-point and resumed, the study continues without
measuring a completed point again. The SSH variant runs two hosts through the real sshd."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import optuna
import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.sim.config import TIME_SCALE_ENV
from ddtree_tui.sweep import optimizer as opt
from ddtree_tui.sweep.runner import SweepEvent, SweepRunner, SweepSettings
from ddtree_tui.sweep.spec import parse_set
from tests.fixtures.services.support import cleanup_workdir
from tests.integration.test_sweep import cli_here
from tests.util import free_port

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def _holds_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))
    # The simulators a local host launches run 10x fast (load time, decode steps; the sshd tests' remote ones
    # do not get this environment): these tests check which points the study chose and measured, once each,
    # and what was put back, not the simulated pace.
    monkeypatch.setenv(TIME_SCALE_ENV, "10")


def _svc(name: str, port: int) -> str:
    return (
        f'[[service]]\nname = "{name}"\nalgorithm = "ddtree"\nmode = "tree"\nlauncher = "sim"\nport = {port}\n'
        "budget = 16\nstartup_timeout = 30\n[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    )


def _keys(state_points: list[dict]) -> list[str]:
    return [json.dumps(p["overrides"], sort_keys=True) for p in state_points if p["status"] == "done"]


@pytest.mark.slow
async def test_tpe_two_workers_one_study_stop_and_resume(tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    prof = parse_profile(
        f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n{_svc("a", free_port())}{_svc("b", free_port())}'
    )
    fleet = Fleet([prof], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", telemetry=False,
                  probe_interval=0.3)  # fmt: skip
    out = tmp_path / "out"
    settings = SweepSettings(
        ref="h/a", dims=[parse_set("budget=4,8,16"), parse_set("env.SGLANG_DDTREE_MAX_TOPK=1,2")],
        strategy="tpe", trials=4, workers=["h/b"], repeats=1, warmup=0, max_new_tokens=16, prune=False,
    )  # fmt: skip
    stop = asyncio.Event()

    def on_event(ev: SweepEvent) -> None:
        if ev.status == "done" and ev.index >= 0:
            stop.set()  # stopped as soon as one point is measured: the other worker is cut off mid-point

    try:
        await fleet.start()
        first = await SweepRunner(fleet, settings, out, on_event=on_event, stop=stop).run()
        assert first.finished is False and first.restored is True
        done1 = {p.index: p.finished_at for p in first.points if p.status == "done"}
        assert done1 and (out / "study.db").exists()
        assert first.study is not None and first.study.workers == ["h/a", "h/b"]
        # resumed: the study is reopened, the cut-off point measured again, the budget spent, nothing twice
        state = await SweepRunner(fleet, settings, out, resume=True).run()
        assert state.finished is True and state.restored is True
        points = json.loads((out / "sweep.json").read_text())["points"]
        keys = _keys(points)
        assert len(keys) == len(set(keys)) >= 4, keys
        for i, at in done1.items():
            assert state.points[i].finished_at == at  # measured once, before the stop
        assert {p.worker for p in state.points if p.status == "done"} <= {"h/a", "h/b"}
        assert {p.status for p in state.points} <= {"done", "skipped"}
        assert all("not chosen" in (p.error or "") for p in state.points if p.status == "skipped")
        study = optuna.load_study(study_name=state.id, storage=f"sqlite:///{out / 'study.db'}")
        space = opt.Space(dims={d.key: d.values for d in settings.dims})
        measured = [opt.key_of(space.values(t.params)) for t in opt.measured(study)]
        assert sorted(measured) == sorted(keys)  # the study and sweep.json tell the same story
        assert state.study is not None and state.study.best is not None
        assert fleet.current_spec("h/a").budget == 16 and fleet.current_spec("h/b").budget == 16
    finally:
        await fleet.stop()
        cleanup_workdir(wd)


@pytest.mark.slow
async def test_the_last_relaunch_re_measures_a_top_candidate_through_the_fleet(tmp_path: Path) -> None:
    """--trials 8: 7 points explored, then the best so far relaunched and measured again (one relaunch of
    the 8); its record shows the latest measurement, and the pick is the best mean (optimizer.best_params)."""
    wd = tmp_path / "wd"
    prof = parse_profile(f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n{_svc("a", free_port())}')
    fleet = Fleet([prof], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", telemetry=False,
                  probe_interval=0.3)  # fmt: skip
    out = tmp_path / "out"
    settings = SweepSettings(
        ref="h/a", dims=[parse_set("budget=4,8,16"), parse_set("env.SGLANG_DDTREE_MAX_TOPK=1,2,4")],
        strategy="tpe", trials=8, repeats=1, warmup=0, max_new_tokens=16, prune=False,
    )  # fmt: skip
    try:
        await fleet.start()
        state = await SweepRunner(fleet, settings, out).run()
        assert state.finished is True and state.restored is True
        assert state.study is not None and state.study.relaunches == 8
        done = [p for p in state.points if p.status == "done"]
        assert len(done) == 7 and sorted(p.attempts for p in done) == [1] * 6 + [2]
        study = optuna.load_study(study_name=state.id, storage=f"sqlite:///{out / 'study.db'}")
        space = opt.Space(dims={d.key: d.values for d in settings.dims})
        assert opt.remeasures(study) == 1
        pooled = opt.pooled(study, space)
        twice = [p.key for p in pooled if len(p.values) == 2]
        assert twice == [opt.key_of(next(p for p in done if p.attempts == 2).overrides)]
        assert state.study.best == space.values(pooled[0].params)  # the best mean
    finally:
        await fleet.stop()
        cleanup_workdir(wd)


@pytest.mark.slow
@pytest.mark.sshd
def test_two_hosts_one_study_through_real_sshd(tmp_path: Path, ssh_env, sshd) -> None:
    """Two hosts (two real sshd servers, `sshd` and one more) share one study: each measures points, none
    twice."""
    ssh_env.add_server("hostb")
    profiles = []
    for alias, name in (("testhost", "hosta"), ("hostb", "hostb")):
        extra = f"python = {json.dumps(sys.executable)}\nconnect_timeout = 5\n\n{_svc('dd', free_port())}"
        p = tmp_path / f"{name}.toml"
        p.write_text(ssh_env.profile_toml(alias, name=name, extra=extra))
        profiles += ["--profile", str(p)]
    out = tmp_path / "out"
    try:
        argv = [*profiles, "sweep", "hosta/dd",
                "--set", "budget=4,8,16", "--set", "env.SGLANG_DDTREE_MAX_TOPK=1,2", "--strategy", "tpe",
                "--trials", "4", "--worker", "hostb/dd", "--seed", "3", "--repeats", "1", "--warmup", "0",
                "--max-new-tokens", "16", "--out", str(out), "--no-telemetry"]  # fmt: skip
        # in this process (nobody signals it: what the study and sweep.json say is what is checked)
        (p,) = cli_here(tmp_path, argv)
        assert p.returncode == 0, p.stderr[-3000:]
        state = json.loads((out / "sweep.json").read_text())
        done = [q for q in state["points"] if q["status"] == "done"]
        keys = _keys(state["points"])
        assert len(keys) == len(set(keys)) == 4 and state["restored"] is True
        assert {q["worker"] for q in done} == {"hosta/dd", "hostb/dd"}
        for q in done:
            assert q["server_info"]["speculative_ddtree_budget"] == int(q["overrides"]["budget"])
        assert state["study"]["relaunches"] == 4 and state["study"]["storage"].startswith("sqlite:///")
    finally:
        for alias in ("testhost", "hostb"):
            cleanup_workdir(ssh_env.root / f"work-{alias}")

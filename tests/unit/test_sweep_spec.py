"""The tuning lab's pure parts: dimensions, the override layer, loads, constraints, the plan, the analysis
(ranking, groups, Pareto fronts, CSV) and `apply`'s comment-keeping edit of a profile."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.sweep import results as rs
from ddtree_tui.sweep.apply import edit_profile_text, write_profile
from ddtree_tui.sweep.spec import (
    SweepError,
    apply_overrides,
    current_value,
    parse_constraint,
    parse_load,
    parse_set,
    plan_points,
)
from ddtree_tui.sweep.state import Measurement, Metrics, PointRecord, Sample, SweepState, atomic_write

PROFILE = """# my host
name = "h"
address = "local"

[[service]]
name = "dd"   # the DDTree service
algorithm = "ddtree"
mode = "shadow-linear"
launcher = "sim"
port = 31011
budget = 32  # chosen by hand
extra_args = ["--cuda-graph-max-bs", "8"]
[service.env]
# the tree's width
SGLANG_DDTREE_MAX_TOPK = "4"
"""


def _spec():
    prof = parse_profile(PROFILE)
    return prof.services[0]


def test_parse_set_and_keys() -> None:
    d = parse_set("budget=8,16,32")
    assert (d.key, d.values) == ("budget", ["8", "16", "32"])
    assert parse_set("env.SGLANG_DDTREE_MAX_TOPK=2,4").values == ["2", "4"]
    assert parse_set("--cuda-graph-max-bs=4,8").key == "--cuda-graph-max-bs"
    for bad, words in [("budget", "KEY=v1"), ("budget=", "no values"), ("budjet=1", "not a service key"),
                       ("port=1,2", "identifies the service"), ("env=1", "one variable"),
                       ("env.1X=2", "not an environment"), ("budget=8,8", "twice"),
                       ("env.HF_TOKEN=a,b", "a secret is never a dimension"), ("--api-key=a", "secret")]:  # fmt: skip
        with pytest.raises(SweepError, match=words):
            parse_set(bad)


def test_overrides_validate_against_the_profile_model() -> None:
    spec = _spec()
    s = apply_overrides(spec, {"budget": "16", "env.SGLANG_DDTREE_MAX_TOPK": "2", "mode": "tree"})
    assert (s.budget, s.mode, s.env["SGLANG_DDTREE_MAX_TOPK"]) == (16, "tree", "2")
    assert spec.budget == 32  # the profile's spec is untouched
    s = apply_overrides(
        spec, {"--cuda-graph-max-bs": "16", "args.enable-foo": "true", "sim.decode_rate": "99"}
    )
    assert s.extra_args == ["--cuda-graph-max-bs", "16", "--enable-foo"] and s.sim.decode_rate == 99
    assert apply_overrides(spec, {"--cuda-graph-max-bs": "false"}).extra_args == []
    with pytest.raises(SweepError, match=r"budget=0: budget: Input should be greater than or equal to 1"):
        apply_overrides(spec, {"budget": "0"})
    with pytest.raises(SweepError, match="mode"):
        apply_overrides(spec, {"mode": "linear"})  # the model's own rule: ddtree needs shadow-linear or tree
    with pytest.raises(SweepError, match="block_size"):
        apply_overrides(spec, {"block_size": "big"})
    assert current_value(spec, "budget") == "32"
    assert current_value(spec, "env.SGLANG_DDTREE_MAX_TOPK") == "4"
    assert current_value(spec, "--cuda-graph-max-bs") == "8"


def test_loads_constraints_and_plans() -> None:
    assert parse_load(None) == [1] and parse_load("concurrency:1,8") == [1, 8]
    for bad in ("rate:5", "concurrency:", "concurrency:0", "concurrency:a"):
        with pytest.raises(SweepError):
            parse_load(bad)
    c = parse_constraint("ttft_p90<0.3s")
    assert (
        (c.metric, c.op, c.value) == ("ttft_p90", "<", 300.0)
        and c.ok(299)
        and not c.ok(300)
        and not c.ok(None)
    )
    assert parse_constraint("accept_length>=3").ok(3.0)
    for bad in ("ttft<3", "tok_s>5ms", "nonsense"):
        with pytest.raises(SweepError):
            parse_constraint(bad)
    dims = [parse_set("budget=8,16,32"), parse_set("env.SGLANG_DDTREE_MAX_TOPK=1,2")]
    grid = plan_points(dims, [1, 8])
    assert len(grid) == 12 and [p.index for p in grid] == list(range(12))
    assert grid[0].launch_key == grid[1].launch_key and (grid[0].concurrency, grid[1].concurrency) == (1, 8)
    one = plan_points(dims, [1], "one-at-a-time")
    assert [p.overrides for p in one] == [{"budget": "8"}, {"budget": "16"}, {"budget": "32"},
                                          {"env.SGLANG_DDTREE_MAX_TOPK": "1"}, {"env.SGLANG_DDTREE_MAX_TOPK": "2"}]  # fmt: skip


def _measure(tok: float, ttft: float, accept: float, step: float, spread: float = 0.01) -> Measurement:
    samples = [
        Sample(prompt_id=p, repeat=r, ok=True, tok_s=tok * (1 + spread * (r - 1) + 0.1 * i), ttft_ms=ttft)
        for i, p in enumerate(("a", "b", "c"))
        for r in range(3)
    ]
    m = Metrics(n=9, tok_s=tok, ttft_p50=ttft, ttft_p90=ttft, accept_length=accept, step_ms=step)
    return Measurement(samples=samples, metrics=m)


def _state() -> SweepState:
    from ddtree_tui.sweep.spec import Dimension
    from ddtree_tui.sweep.state import BaselineRecord

    pts = [
        PointRecord(
            index=0, overrides={"budget": "8"}, status="done", measurement=_measure(100, 30, 3.0, 20)
        ),
        PointRecord(
            index=1, overrides={"budget": "16"}, status="done", measurement=_measure(120, 40, 4.0, 25)
        ),
        PointRecord(
            index=2, overrides={"budget": "32"}, status="done", measurement=_measure(120.5, 60, 4.5, 35)
        ),
        PointRecord(index=3, overrides={"budget": "64"}, status="failed", error="crashed"),
    ]
    return SweepState(
        id="x", ref="h/dd", dims=[Dimension(key="budget", values=["8", "16", "32", "64"])], loads=[1],
        strategy="grid", prompts="seed3", repeats=3, warmup=1, max_new_tokens=64, objective="tok_s",
        points=pts, baselines=[BaselineRecord(seq=0, at=0, after_point=-1, measurement=_measure(100, 35, 3.0, 20))],
        started_at=0, updated_at=0,
    )  # fmt: skip


def test_analysis_ranks_groups_fronts_and_constraints() -> None:
    res = rs.analyse(_state())
    by = {p.index: p for p in res.points}
    assert res.best == 2 and by[2].rank == 1 and by[1].rank == 2 and by[0].rank == 3
    assert by[1].group == by[2].group != by[0].group  # 120 vs 120.5: indistinguishable
    assert by[0].delta_lo_pct is not None and by[0].delta_lo_pct <= 0 <= (by[0].delta_hi_pct or 0)
    assert by[1].delta_pct is not None and by[1].delta_lo_pct is not None and by[1].delta_lo_pct > 0
    assert "faster" in by[1].verdict
    assert {i for i, p in by.items() if p.pareto_latency} == {0, 1, 2}
    assert by[3].rank is None and by[3].status == "failed"
    # a latency constraint moves the best to the point that meets it
    res2 = rs.analyse(_state(), constraints=["ttft_p90<50ms"])
    assert res2.best == 1 and "ttft_p90<50ms" in {v for p in res2.points for v in p.violated}
    # TTFT as the objective: lower is better
    assert rs.analyse(_state(), objective="ttft").best == 0
    text = rs.table(res)
    assert "budget=32" in text and "#3 budget=64: failed: crashed" in text and "best: #2" in text
    csv = rs.to_csv(res).splitlines()
    assert csv[0].startswith("index,rank,group,status,concurrency,label,budget,objective") and len(csv) == 5
    assert "B" in rs.pareto_chart(res)


def test_a_point_without_enough_data_for_an_interval_is_not_ranked_apart() -> None:
    """Issue 29: a point measured once (no interval against the group's head) was put in a group of its own,
    as if it were told apart; it cannot be, so it shares the head's group, and the table says why."""
    st = _state()
    one = Measurement(samples=[Sample(prompt_id="a", repeat=0, ok=True, tok_s=90.0, ttft_ms=30.0)],
                      metrics=Metrics(n=1, tok_s=90.0, ttft_p50=30.0, ttft_p90=30.0, accept_length=3.0, step_ms=20))  # fmt: skip
    st.points[3] = PointRecord(index=3, overrides={"budget": "64"}, status="done", measurement=one)
    res = rs.analyse(st)
    by = {p.index: p for p in res.points}
    assert by[3].rank == 4 and "not enough data for an interval" in by[3].verdict
    assert by[3].group == by[0].group  # not a group of its own: nothing tells it from its head
    assert "or too little data for an interval" in rs.table(res)
    # the caveat says what the sweep did about warm-up
    st0 = st.model_copy(
        update={"warmup": 0, "caveats": ["Each point is measured after one warm-up request; x"]}
    )
    cav = rs.analyse(st0).caveats
    assert any(c.startswith("Each point is measured after no warm-up request") for c in cav), cav
    assert not any("one warm-up" in c for c in cav)


def test_apply_keeps_comments_and_layout(tmp_path: Path) -> None:
    new = edit_profile_text(PROFILE, Path("p.toml"), "dd", {"budget": "16", "env.SGLANG_DDTREE_MAX_TOPK": "2",
                                                              "mode": "tree", "--cuda-graph-max-bs": "16"})  # fmt: skip
    for line in ("# my host", 'name = "dd"   # the DDTree service', "# the tree's width"):
        assert line in new
    assert "budget = 16  # chosen by hand" in new and 'SGLANG_DDTREE_MAX_TOPK = "2"' in new
    assert 'mode = "tree"' in new
    s = parse_profile(new).services[0]
    assert (s.budget, s.extra_args) == (16, ["--cuda-graph-max-bs", "16"])
    with pytest.raises(SweepError, match="no \\[\\[service\\]\\] named 'zz'"):
        edit_profile_text(PROFILE, Path("p.toml"), "zz", {"budget": "16"})
    p = tmp_path / "p.toml"
    p.write_text(PROFILE)
    os.chmod(p, 0o640)
    write_profile(p, new)
    assert p.read_text() == new and stat.S_IMODE(p.stat().st_mode) == 0o640
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(SweepError, match="not a regular file"):
        write_profile(fifo, new)
    with pytest.raises(OSError, match="not a regular file"):
        atomic_write(tmp_path, "x")


def test_hold_file_seen_by_other_processes_and_stale_when_its_process_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import subprocess
    import sys

    import psutil

    from ddtree_tui.services import holdfiles as hold

    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path))
    hold.acquire("h/dd", "sweep X")
    assert hold.holder("h/dd") is None  # our own hold does not refuse us
    f = next(tmp_path.glob("*.json"))
    parent = os.getppid()  # a live process that is not us
    f.write_text(
        json.dumps({"pid": parent, "create_time": psutil.Process(parent).create_time(), "owner": "sweep Y"})
    )
    assert hold.holder("h/dd") == f"sweep Y (pid {parent})"
    with pytest.raises(ValueError, match="held by sweep Y"):
        hold.acquire("h/dd", "sweep X")
    f.write_text(json.dumps({"pid": parent, "create_time": 1.0, "owner": "sweep Y"}))  # pid reused
    assert hold.holder("h/dd") is None
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    f.write_text(json.dumps({"pid": int(gone.stdout), "create_time": 5.0, "owner": "sweep Z"}))
    assert hold.holder("h/dd") is None  # a SIGKILLed sweep's hold is stale
    hold.acquire("h/dd", "sweep X")
    hold.release("h/dd")
    assert not list(tmp_path.glob("*.json"))


def test_table_header_names_the_unit_once_and_apply_names_the_directory() -> None:
    res = rs.analyse(_state())
    text = rs.table(res, "runs/sweep 1")
    assert "tok_s tok/s" not in text and " tok/s " in text.splitlines()[2]
    assert "ddtree-tui sweep apply 'runs/sweep 1' --point 2" in text
    assert " DIR " not in rs.table(res)  # no literal placeholder a user would copy
    assert "TTFT p50 ms" in rs.table(rs.analyse(_state(), objective="ttft"))

"""benchmarks/peers.py's round-by-round CPU table (issue 26): each tool's CPU per token beside AIPerf's of the
same round, as a ratio, with the machine's speed probe and steal time for that run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import peers


def _score(cpu: float, probe: float, steal: float) -> peers.Score:
    truth = peers.Truth(ttft_ms=20.0, e2e_ms=500.0, tok_s=1000.0, agg=8000.0, late_p99=None)
    return peers.Score(0.1, 0.0, 0.0, 0.0, cpu, None, 100, truth, {}, "1", probe_ms=probe, steal_pct=steal)


def test_each_round_is_divided_by_aiperfs_own_round_not_a_median() -> None:
    scores = {
        "ours": [_score(20.0, 30.0, 0.0), _score(24.0, 40.0, 1.5)],
        "aiperf": [_score(200.0, 31.0, 0.1), _score(160.0, 39.0, 2.0)],
    }
    out = "\n".join(peers.cpu_rounds(scores, ["ours", "aiperf"]))
    assert "| 1 " in out and "20.0 (10.0 %)" in out
    assert "24.0 (15.0 %)" in out  # 24 / 160: the same round's AIPerf, not the median of its rounds (180)
    assert "40.0 / 1.50" in out and "39.0 / 2.00" in out


def test_without_aiperf_there_is_no_ratio_and_no_table_without_scores() -> None:
    out = "\n".join(peers.cpu_rounds({"ours": [_score(20.0, 30.0, 0.0)]}, ["ours"]))
    assert "20.0" in out and "%)" not in out and "÷ aiperf" not in out
    assert peers.cpu_rounds({}, ["ours"]) == []


def test_the_probe_times_python_work_and_steal_reads_proc_stat() -> None:
    assert peers.speed_probe() > 0
    st = peers._steal()
    if Path("/proc/stat").exists():
        assert st is not None and 0 <= st[0] <= st[1]

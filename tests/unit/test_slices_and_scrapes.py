"""Time slices and the server's windows on made-up data: which window a request counts in, the in-flight
mean and max, the rates over the window's length, an agentic run's turns, a soak's windows read as its
slices; Prometheus text of several label sets summed, histogram quantiles as Prometheus interpolates them,
counters across a server restart, and the join of both in the CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest

from ddtree_tui.bench import slices
from ddtree_tui.bench.models import RequestResult
from ddtree_tui.bench.results import AgenticRun, TurnResult
from ddtree_tui.bench.servermetrics import Hist, Sample, histogram_quantile, parse_metrics, prometheus_window
from tests.bench_runs import plain_run

T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def _r(
    svc: str, sent: float, e2e: float | None, tokens: int = 10, ok: bool = True, seq: int = 0
) -> RequestResult:
    return RequestResult(
        service=svc, algorithm="dflash", mode=None, prompt_id="p", repeat=0, seq=seq, started_at=T0 + sent, ok=ok,
        ttft_s=None if e2e is None else e2e / 4, e2e_s=e2e, output_tokens=tokens if ok else None,
    )  # fmt: skip


def test_requests_count_in_the_window_they_finished_in() -> None:
    rs = [_r("h/a", 0.0, 0.5, seq=0), _r("h/a", 0.5, 1.0, seq=1), _r("h/a", 1.2, 0.4, seq=2),
          _r("h/a", 2.5, None, ok=False, seq=3), _r("h/b", 0.1, 0.2, seq=4)]  # fmt: skip
    s = slices.compute(rs, T0, 3.0, 1.0)
    by = {(r.service, r.index): r for r in s.rows}
    assert s.width_s == 1.0 and sorted(by) == [("h/a", 0), ("h/a", 1), ("h/a", 2), ("h/b", 0)]
    a0, a1, a2 = by["h/a", 0], by["h/a", 1], by["h/a", 2]
    assert (a0.n, a1.n, a2.n) == (1, 2, 0) and a2.failed == 1  # the failure counts where it was sent
    assert a1.output_throughput == pytest.approx(20.0) and a1.request_throughput == pytest.approx(2.0)
    # in flight in [0, 1): the first 0–0.5, the second 0.5–1.0 → 1.0 on average, at most 1
    assert a0.mean_in_flight == pytest.approx(1.0) and a0.max_in_flight == 1
    # in [1, 2): the second until 1.5, the third 1.2–1.6 → (0.5 + 0.4) / 1, at most 2
    assert a1.mean_in_flight == pytest.approx(0.9) and a1.max_in_flight == 2
    assert a0.ttft_ms_p50 == pytest.approx(125.0) and a0.e2e_ms_p50 == pytest.approx(500.0)
    # warm-ups are never sliced; every counted request in exactly one window
    warm = rs[0].model_copy(update={"warmup": True, "seq": -1})
    assert sum(r.n + r.failed for r in slices.compute([warm, *rs], T0, 3.0, 1.0).rows) == len(rs)


def test_a_plain_and_an_agentic_run_sliced_and_written_as_csv() -> None:
    run = plain_run("r1", results=[_r("h/a", i * 0.4, 0.3, seq=i) for i in range(5)], wall_s=2.0)
    run.slices = slices.slice_run(run, 1.0)
    assert [r.n for r in run.slices.rows] == [2, 3]
    text = b"".join(slices.iter_csv(run)).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [x["index"] for x in rows] == ["0", "1"] and rows[0]["run_id"] == "r1"
    assert rows[0]["server_source"] == "" and "server_ttft_ms_p50" in rows[0]
    ag = AgenticRun(
        id="ag1", started_at=datetime(2026, 1, 1, tzinfo=UTC), wall_s=2.0, source="agentic", sessions=1,
        turns=2, think_time_s=0.0,
        turns_results=[TurnResult(session="s1", service="h/a", turn=k, ok=True, ttft_ms=20.0, e2e_ms=300.0,
                                  output_tokens=8, started_at=T0 + 1.1 * (k - 1)) for k in (1, 2)],
    )  # fmt: skip
    s = slices.slice_run(ag, 1.0)
    assert [(r.index, r.n) for r in s.rows] == [(0, 1), (1, 1)] and s.rows[0].ttft_ms_p50 == 20.0


TEXT = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",dp_rank="0"} 3.0
sglang:num_running_reqs{model_name="m",dp_rank="1"} 2.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",dp_rank="0"} 0.2
sglang:token_usage{model_name="m",dp_rank="1"} 0.4
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",is_streaming="true"} 100.0
sglang:generation_tokens_total{model_name="m",is_streaming="false"} 20.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{model_name="m",is_streaming="true",le="0.1"} 2.0
sglang:time_to_first_token_seconds_bucket{model_name="m",is_streaming="true",le="0.5"} 4.0
sglang:time_to_first_token_seconds_bucket{model_name="m",is_streaming="true",le="+Inf"} 4.0
sglang:time_to_first_token_seconds_count{model_name="m",is_streaming="true"} 4.0
sglang:time_to_first_token_seconds_sum{model_name="m",is_streaming="true"} 0.9
sglang:time_to_first_token_seconds_bucket{model_name="m",is_streaming="false",le="0.1"} 0.0
sglang:time_to_first_token_seconds_bucket{model_name="m",is_streaming="false",le="0.5"} 0.0
sglang:time_to_first_token_seconds_bucket{model_name="m",is_streaming="false",le="+Inf"} 4.0
sglang:time_to_first_token_seconds_count{model_name="m",is_streaming="false"} 4.0
sglang:time_to_first_token_seconds_sum{model_name="m",is_streaming="false"} 4.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running 7.0
"""


def test_prometheus_text_summed_over_label_sets_and_quantiles_interpolated() -> None:
    s = parse_metrics(TEXT, 100.0)
    assert s is not None
    assert s.values["sglang:num_running_reqs"] == 5.0  # requests add up over ranks
    assert s.values["sglang:token_usage"] == pytest.approx(0.3)  # ratios average
    assert s.values["sglang:generation_tokens_total"] == 120.0  # is_streaming true + false
    h = s.hists["sglang:time_to_first_token_seconds"]
    assert h.buckets == {0.1: 2.0, 0.5: 4.0, float("inf"): 8.0} and h.count == 8.0
    # p25 in the first bucket: 0 + 0.1·(2/2); p50 in the second: 0.1 + 0.4·(4−2)/(4−2); p90 in +Inf: 0.5
    assert histogram_quantile(0.25, h.buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.5, h.buckets) == pytest.approx(0.5)
    assert histogram_quantile(0.375, h.buckets) == pytest.approx(0.3)
    assert histogram_quantile(0.9, h.buckets) == pytest.approx(0.5)
    assert histogram_quantile(0.5, {}) is None
    assert parse_metrics("# TYPE vllm:x gauge\nvllm:x 1.0\n", 0.0) is None  # not SGLang
    with pytest.raises(ValueError):
        parse_metrics("this is { not prometheus", 0.0)


def test_window_deltas_and_a_counter_reset() -> None:
    def smp(t: float, gen: float, running: float, ttft: dict[float, float]) -> Sample:
        return Sample(
            t=T0 + t,
            values={"sglang:generation_tokens_total": gen, "sglang:num_running_reqs": running},
            hists={"sglang:time_to_first_token_seconds": Hist(ttft, count=max(ttft.values()), sum=0.0)},
        )

    inf = float("inf")
    ss = [
        smp(0.0, 100, 0, {0.1: 1, inf: 1}),
        smp(0.5, 150, 4, {0.1: 1, inf: 3}),
        smp(1.0, 200, 2, {0.1: 3, inf: 5}),
        smp(1.5, 30, 1, {0.1: 1, inf: 1}),
    ]  # fmt: skip  (a restart at 1.5)
    w0 = prometheus_window("h/a", ss, 0, 0.0, 1.0, T0, last=False)
    assert w0.generation_tokens == 100 and w0.output_throughput == pytest.approx(100.0)
    assert w0.running_reqs_mean == pytest.approx(2.0) and w0.running_reqs_max == 4.0  # scrapes at 0 and 0.5
    assert w0.ttft_count == 4  # 5 − 1 observations; 2 of them ≤ 0.1 s
    assert w0.ttft_ms_p50 == pytest.approx(100.0)
    w1 = prometheus_window("h/a", ss, 1, 1.0, 2.0, T0, last=True)
    assert w1.generation_tokens == 30 and w1.ttft_count == 1  # after the reset: the new counts alone

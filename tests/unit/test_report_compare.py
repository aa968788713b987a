"""Reports without a browser: pairing, alignment, comparability, the terminal table and which HTML parts
appear for which data (runs built here from numbers)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ddtree_tui.bench.metrics import summarize
from ddtree_tui.bench.models import (
    BenchRun,
    BenchTarget,
    PromptInfo,
    RequestResult,
    SamplingParams,
    TargetInfo,
    dump,
)
from ddtree_tui.report import html
from ddtree_tui.report.compare import (
    aligned,
    comparability,
    comparison_table,
    cross_run_delta,
    paired_vs_baseline,
    single_run_text,
)
from ddtree_tui.report.runs import LoadedRun, ReportInputError, parse_run, run_label

SERVICES = ("h/a", "h/b")


def _run(
    speeds: dict[str, dict[str, list[float]]],
    *,
    run_id: str = "r1",
    concurrency: int = 1,
    max_new_tokens: int = 64,
    model: str = "m",
    extras: bool = True,
) -> BenchRun:
    """speeds[service][prompt] = tok/s of each repeat."""
    results: list[RequestResult] = []
    seq = 0
    prompts = sorted({p for per in speeds.values() for p in per})
    for p in prompts:
        for rep in range(max(len(per.get(p, [])) for per in speeds.values())):
            for svc, per in speeds.items():
                if rep >= len(per.get(p, [])):
                    continue
                v = per[p][rep]
                results.append(
                    RequestResult(
                        service=svc,
                        algorithm="dflash",
                        mode="linear",
                        prompt_id=p,
                        repeat=rep,
                        seq=seq,
                        started_at=0.0,
                        tok_s=v,
                        ttft_s=0.03,
                        e2e_s=64 / v,
                        output_tokens=64,
                        accept_length=3.0 + v / 1000,
                        itl_quantiles_ms=[5.0 + i / 10 for i in range(21)] if extras else None,
                        chunk_tokens_hist={2: 10, 3: 12} if extras else None,
                    )
                )
                seq += 1
    return _summarized(
        BenchRun(
            id=run_id,
            started_at=datetime(2026, 12, 1, tzinfo=UTC),
            prompt_set="seed3",
            prompts=[PromptInfo(id=p, title=p, approx_tokens=10) for p in prompts],
            sampling=SamplingParams(max_new_tokens=max_new_tokens),
            repeats=3,
            warmup=0,
            concurrency=concurrency,
            targets=[
                TargetInfo(
                    ref=s, base_url="http://127.0.0.1:1", algorithm="dflash", mode="linear", model_path=model
                )
                for s in speeds
            ],
            baseline=next(iter(speeds)),
            results=results,
        )
    )


def _summarized(run: BenchRun) -> BenchRun:
    """rows and summary as the runner computes them (each service measured for 2 s)."""
    tgt = [
        BenchTarget(ref=t.ref, base_url=t.base_url, algorithm=t.algorithm, mode=t.mode) for t in run.targets
    ]
    pids = [p.id for p in run.prompts]
    rows, summary = summarize(run.results, tgt, pids, run.baseline, {t.ref: 2.0 for t in tgt})
    return run.model_copy(update={"rows": rows, "summary": summary})


def _lr(run: BenchRun, i: int = 0) -> LoadedRun:
    return LoadedRun(path=f"{run.id}.json", label=run_label(i), run=run, raw=dump(run))


def test_paired_delta_pairs_prompt_and_repeat() -> None:
    # b is exactly 10 % faster on every (prompt, repeat), though prompts differ a lot
    a = {"p1": [100.0, 104.0, 98.0], "p2": [50.0, 52.0, 49.0]}
    run = _run({"h/a": a, "h/b": {p: [x * 1.1 for x in v] for p, v in a.items()}})
    d = paired_vs_baseline(run, "h/b")
    assert d is not None and d.n == 6 and d.pct == pytest.approx(10.0)
    assert d.lo_pct == pytest.approx(10.0) and d.hi_pct == pytest.approx(10.0)
    one = paired_vs_baseline(run, "h/b", "p2")
    assert one is not None and one.n == 3
    assert paired_vs_baseline(run, "h/a") is None  # the baseline itself


def test_cross_run_alignment_and_services_in_one_run_only() -> None:
    a = _run({"h/a": {"p1": [100.0, 101.0, 99.0]}, "h/b": {"p1": [90.0, 91.0, 89.0]}}, run_id="ra")
    b = _run({"h/a": {"p1": [110.0, 111.0, 109.0]}, "h/c": {"p1": [70.0, 71.0, 72.0]}}, run_id="rb")
    d = cross_run_delta(a, b, "h/a")
    assert d.pct == pytest.approx(10.0) and d.measurable
    rows = {(r.service, r.prompt): r for r in aligned([_lr(a, 0), _lr(b, 1)])}
    assert rows[("h/a", None)].verdicts[1].startswith("B faster by 10.0 %")
    assert rows[("h/b", None)].estimates[1] is None and rows[("h/b", None)].verdicts[1] == "only in A"
    assert rows[("h/c", None)].estimates[0] is None and rows[("h/c", None)].verdicts[1] == "not in A"


def test_comparability_names_what_differs() -> None:
    base = _run({"h/a": {"p1": [100.0, 101.0]}})
    same = _run({"h/a": {"p1": [100.0, 101.0]}}, run_id="r2")
    assert comparability(_lr(base), _lr(same, 1)) == []
    other = _run({"h/a": {"p9": [1.0, 2.0]}}, max_new_tokens=128, model="m2", concurrency=4, run_id="r3")
    why = comparability(_lr(base), _lr(other, 1))
    assert "different sampling: max_new_tokens 64 vs 128" in why
    assert any(w.startswith("different prompt set") for w in why)
    assert "different model: h/a: m vs m2" in why
    assert "different load: concurrency 1 vs 4" in why
    text = comparison_table([_lr(base), _lr(other, 1)])
    assert "NOT COMPARABLE: B vs A: different sampling: max_new_tokens 64 vs 128" in text


def test_terminal_texts() -> None:
    a = {"p1": [100.0, 102.0, 98.0]}
    run = _run({"h/a": a, "h/b": {"p1": [97.0, 99.1, 95.0]}})
    text = single_run_text(_lr(run))
    assert "verdicts (95 % CI, as the run stored them):" in text
    assert "h/b vs h/a (baseline), tok/s: h/b slower by " in text
    two = comparison_table([_lr(run), _lr(run.model_copy(update={"id": "r2"}), 1)])
    assert "B vs A: comparable" in two
    assert "no measurable difference (Δ 0.0 %" in two


def test_html_parts_follow_the_data() -> None:
    run = _run({"h/a": {"p1": [100.0, 101.0, 99.0]}, "h/b": {"p1": [90.0, 91.0, 89.0]}})
    page = html.render([_lr(run)])
    assert (
        page.count('<figure class="chart"') == 7 and 'data-charts="7"' in page
    )  # 7th: tok/s vs accept length
    assert "Aligned on service and prompt" not in page and "Can these runs be compared?" not in page
    assert "SIMULATED —" not in page and "<script" not in page
    assert "Not shown: throughput vs concurrency (needs runs at two or more concurrency levels" in page
    # an older run JSON (no ITL quantiles, no chunk histogram) still renders; those charts are named as left out
    old = _run({"h/a": {"p1": [100.0, 101.0]}}, extras=False)
    page = html.render([_lr(old)])
    assert 'id="chart-itl-cdf"' not in page and 'id="chart-chunks"' not in page
    assert "the runs carry no data for them: Δ tok/s with intervals, ITL CDF, tokens per chunk" in page
    # two runs at different concurrency: the load chart
    c4 = _run({"h/a": {"p1": [300.0, 310.0]}}, concurrency=4, run_id="c4")
    page = html.render([_lr(old), _lr(c4, 1)])
    assert 'id="chart-load"' in page and "NOT COMPARABLE" in page


def test_parse_run_errors_name_the_file() -> None:
    with pytest.raises(ReportInputError, match=r"^x\.json: not JSON \(line 1"):
        parse_run("{", "x.json")
    with pytest.raises(ReportInputError, match=r"^x\.json: not a bench run"):
        parse_run("[1, 2]", "x.json")
    assert run_label(0) == "A" and run_label(25) == "Z" and run_label(26) == "R27"


def test_series_styles_stay_distinct_past_the_palette() -> None:
    from ddtree_tui.report.charts import PALETTE, Series

    run = _run({"h/a": {"p1": [1.0]}})
    looks = {
        (s.color, s.hatch, s.marker, s.linestyle)
        for s in (Series(label=str(i), run=run, run_label="A", service="h/a", index=i) for i in range(30))
    }
    assert len(looks) == 30 and len(PALETTE) < 30


def test_interrupted_run_with_failures_is_flagged() -> None:
    run = _run({"h/a": {"p1": [100.0, 101.0]}, "h/b": {"p1": [90.0, 91.0]}})
    bad = run.results[0].model_copy(update={"ok": False, "error": "HTTP 500: boom <b>", "tok_s": None})
    run = _summarized(
        run.model_copy(update={"status": "interrupted", "failed": 1, "results": [bad, *run.results[1:]]})
    )
    page = html.render([_lr(run)])
    assert '<div class="banner bad">A (r1.json): interrupted, 1 failed request(s).</div>' in page
    assert "<h2>Failed requests</h2>" in page and "HTTP 500: boom &lt;b&gt;" in page
    # the failed request is out of the numbers: h/a keeps one repeat, so no interval
    assert "101.0 (n=1)" in page and ">1 (1 failed)</td>" in page

"""Pure parts of the benchmark and simulator: schedules, SSE parsing, metric definitions, prompt sets,
interleaving plans, aggregation, reports and history."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from ddtree_tui.bench import history, report
from ddtree_tui.bench.metrics import Timeline, percentile, summarize, timeline_metrics
from ddtree_tui.bench.models import (
    BenchEvent,
    BenchRun,
    BenchTarget,
    RequestResult,
    TokensReceived,
)
from ddtree_tui.bench.prompts import PromptError, agentic, load_jsonl, load_prompts, longctx, seed3
from ddtree_tui.bench.runner import plan
from ddtree_tui.bench.sse import parse_sse_line
from ddtree_tui.bench.timeline import sorted_percentile
from ddtree_tui.sim.config import parse_fault, schedule
from tests.bench_runs import plain_run

A = BenchTarget(ref="h/a", base_url="http://127.0.0.1:1", algorithm="dflash", mode="linear")
B = BenchTarget(ref="h/b", base_url="http://127.0.0.1:2", algorithm="ddtree", mode="shadow-linear")


def test_schedule_is_deterministic_exact_and_has_the_configured_mean() -> None:
    s1 = schedule(7, "hello", 500, 3.4)
    assert s1 == schedule(7, "hello", 500, 3.4)
    assert s1 != schedule(8, "hello", 500, 3.4)
    assert sum(s1) == 500 and min(s1) >= 1 and max(s1) <= 16
    big = schedule(1, "x", 200_000, 3.4)
    assert abs(sum(big) / len(big) - 3.4) < 0.03
    assert schedule(1, "x", 10, 3.4, algorithm="baseline") == [1] * 10
    assert schedule(1, "x", 0, 3.4) == []


def test_parse_fault() -> None:
    assert parse_fault("stall=20").kind == "stall" and parse_fault("stall=20").arg == 20
    assert parse_fault("slow-first-token=1.5").arg == 1.5
    assert parse_fault("http500").arg == 0
    with pytest.raises(ValueError):
        parse_fault("explode")
    with pytest.raises(ValueError):
        parse_fault("stall=x")


def test_sse_parser_tolerates_everything() -> None:
    assert parse_sse_line("") is None
    assert parse_sse_line(": keep-alive") is None
    assert parse_sse_line("event: message") is None
    assert parse_sse_line("data: [DONE]").kind == "done"
    item = parse_sse_line('data: {"text": "a"}')
    assert item is not None and item.kind == "json" and item.data == {"text": "a"}
    assert parse_sse_line('data:{"text": "b"}').data == {"text": "b"}
    assert parse_sse_line('data: {"text": "broken').kind == "bad"
    assert parse_sse_line("data: [1, 2]").kind == "bad"
    assert parse_sse_line("garbage").kind == "bad"


def test_timeline_metrics_definitions() -> None:
    tl = Timeline(t_send=10.0)
    tl.add(10.1, 2, True)  # first text at +100 ms, 2 tokens
    tl.add(10.14, 4, True)  # 40 ms gap, 4 tokens -> four 10 ms ITL samples
    tl.add(10.16, 1, True)  # 20 ms gap, 1 token
    tl.t_end = 10.2
    m = timeline_metrics(tl, 7)
    assert m["ttft_s"] == pytest.approx(0.1)
    assert m["e2e_s"] == pytest.approx(0.2)
    assert m["tok_s"] == pytest.approx(35.0)
    assert m["decode_tok_s"] == pytest.approx(5 / 0.06)
    assert m["itl_mean_ms"] == pytest.approx((4 * 10 + 20) / 5)
    assert m["itl_p50_ms"] == pytest.approx(10)
    assert m["tokens_per_chunk"] == pytest.approx(7 / 3)
    assert m["chunks"] == 3


def test_timeline_unknown_chunk_tokens_share_the_total() -> None:
    tl = Timeline(t_send=0.0)
    for i in range(4):
        tl.add(0.1 * (i + 1), None, True)
    tl.t_end = 0.4
    m = timeline_metrics(tl, 8)
    assert m["tokens_per_chunk"] == pytest.approx(2.0)
    assert m["itl_mean_ms"] == pytest.approx(50.0)
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)


def test_sorted_percentile_reads_a_sorted_list_as_percentile_does() -> None:
    """timeline_metrics sorts a request's ITL samples once and reads its quantiles with sorted_percentile."""
    xs = [7.0, 0.5, 3.25, 3.25, 12.0, 1.0, 9.5]
    s = sorted(xs)
    for q in (0, 5, 33, 50, 90, 99, 100):
        assert sorted_percentile(s, q) == percentile(xs, q)
    assert sorted_percentile([], 50) is None and sorted_percentile([4.0], 99) == 4.0
    tl = Timeline(0.0)
    for i, t in enumerate((0.1, 0.13, 0.2, 0.2, 0.31, 0.5)):
        tl.add(t, 1.0 + (i % 2), True)
    tl.t_end = 0.5
    m = timeline_metrics(tl, 9)
    # reads at 0.1 | 0.13 (2 tokens) | 0.2 and 0.2 (3 tokens) | 0.31 (1) | 0.5 (2): each gap per token
    itl = [15.0, 15.0, 70 / 3, 70 / 3, 70 / 3, 110.0, 95.0, 95.0]
    itl_ms = sorted(itl)
    assert m["itl_p50_ms"] == pytest.approx(percentile(itl_ms, 50))
    assert m["itl_p99_ms"] == pytest.approx(percentile(itl_ms, 99))
    assert m["itl_quantiles_ms"] == [
        round(x, 4) for x in (percentile(itl_ms, p) or 0.0 for p in range(0, 101, 5))
    ]


def test_prompt_sets() -> None:
    assert [p.id for p in seed3()] == ["fibonacci", "quicksort", "math"]
    assert "fibonacci" in seed3()[0].as_text().lower()
    ag = agentic()
    convs: dict[str, list] = {}
    for p in ag:
        convs.setdefault(p.id.split(".")[0], []).append(p)
    assert len(convs) >= 2
    for turns in convs.values():
        assert len(turns) >= 3
        for prev, cur in itertools.pairwise(turns):
            assert cur.messages[: len(prev.messages)] == prev.messages
            assert len(cur.as_text()) > len(prev.as_text())
            assert cur.as_text().startswith(prev.as_text().removesuffix("<|im_start|>assistant\n"))
    assert all(p.approx_tokens >= 2000 for p in longctx())
    assert load_prompts("agentic") == ag
    with pytest.raises(PromptError):
        load_prompts("nope")


def test_jsonl_prompts(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(
        '# comment\n{"id": "a", "prompt": "hi", "max_new_tokens": 5}\n\n'
        '{"text": "raw"}\n{"messages": [{"role": "user", "content": "m"}]}\n'
    )
    ps = load_jsonl(f)
    assert [p.id for p in ps] == ["a", "p-2", "p-3"]
    assert ps[0].max_new_tokens == 5 and ps[1].as_text() == "raw"
    assert ps[2].as_messages() == [{"role": "user", "content": "m"}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "x"}\n{oops\n')
    with pytest.raises(PromptError, match=r"bad.jsonl:2"):
        load_jsonl(bad)
    with pytest.raises(PromptError, match="not found"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_plan_interleaves_services() -> None:
    ps = seed3()
    order = [(t.ref, p.id, r) for batch in plan(ps, [A, B], 2, 1) for t, p, r in batch]
    assert order[:4] == [
        ("h/a", "fibonacci", 0),
        ("h/b", "fibonacci", 0),
        ("h/a", "quicksort", 0),
        ("h/b", "quicksort", 0),
    ]
    assert len(order) == 12 and order[6] == ("h/a", "fibonacci", 1)
    batches = plan(ps, [A, B], 1, 2)
    assert [[(t.ref, p.id) for t, p, _ in b] for b in batches] == [
        [("h/a", "fibonacci"), ("h/a", "quicksort")],
        [("h/b", "fibonacci"), ("h/b", "quicksort")],
        [("h/a", "math")],
        [("h/b", "math")],
    ]


def _res(t: BenchTarget, pid: str, tok_s: float, ok: bool = True, seq: int = 0) -> RequestResult:
    return RequestResult(
        service=t.ref,
        algorithm=t.algorithm,
        mode=t.mode,
        prompt_id=pid,
        repeat=0,
        seq=seq,
        started_at=0.0,
        ok=ok,
        error=None if ok else "boom",
        tok_s=tok_s if ok else None,
        ttft_s=0.05,
        output_tokens=100,
        spec_verify_ct=25,
        accept_length=4.0,
    )


def _run() -> BenchRun:
    results = [
        _res(A, "p", 100),
        _res(A, "p", 110),
        _res(A, "p", 120),
        _res(B, "p", 90),
        _res(B, "p", 0, ok=False),
    ]
    rows, summary = summarize(results, [A, B], ["p"], baseline="h/a")
    return plain_run("r1", repeats=3, warmup=1, results=results, rows=rows, summary=summary, failed=1)


def test_summarize_medians_and_deltas() -> None:
    run = _run()
    a, b = run.rows
    assert (a.tok_s_median, a.tok_s_min, a.tok_s_max, a.n) == (110, 100, 120, 3)
    assert b.n == 1 and b.failed == 1
    assert b.delta_tok_s_pct == pytest.approx((90 - 110) / 110 * 100)
    assert a.delta_tok_s_pct is None
    assert run.summary[0].accept_length_mean == pytest.approx(4.0)
    assert run.summary[1].delta_tok_s_pct == pytest.approx((90 - 110) / 110 * 100)


def test_json_csv_round_trip_and_table() -> None:
    run = _run()
    text = report.to_json(run)
    assert json.loads(text)["schema"] == 1
    assert report.from_json(text) == run
    assert report.from_csv(report.to_csv(run)) == run.rows
    t = report.table(run)
    assert "shadow-linear" in t and "linear" in t and "-18.2%" in t and "1 request(s) failed" in t


def test_history_append_and_load(tmp_path: Path) -> None:
    h = tmp_path / "sub" / "hist.jsonl"
    assert history.load(h) == []
    history.append(_run(), h)
    with open(h, "a") as f:
        f.write('{"schema": 1, "id": "torn')  # a crash mid-line
    history.append(_run().model_copy(update={"id": "r2"}), h)
    runs = history.load(h)
    assert [r.id for r in runs] == ["r1", "r2"]


def test_events_are_a_discriminated_union() -> None:
    ev = TokensReceived(
        run_id="x", service="h/a", prompt_id="p", repeat=0, seq=1, tokens=5, elapsed_s=0.5, tok_s=10
    )
    back = TypeAdapter(BenchEvent).validate_json(ev.model_dump_json())
    assert isinstance(back, TokensReceived) and back.tokens == 5


def test_history_append_accepts_path_first(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    history.append(h, _run())
    assert [r.id for r in history.load(h)] == ["r1"]
    with pytest.raises(TypeError):
        history.append(h, h)


def test_timeline_distributions_for_the_report() -> None:
    tl = Timeline(t_send=10.0)
    tl.add(10.1, 2, True)
    tl.add(10.14, 4, True)  # four 10 ms samples
    tl.add(10.16, 1, True)  # one 20 ms sample
    tl.add(10.2, 4, True)  # four 10 ms samples
    tl.t_end = 10.2
    m = timeline_metrics(tl, 11)
    assert m["chunk_tokens_hist"] == {1: 1, 2: 1, 4: 2}
    q = m["itl_quantiles_ms"]
    assert len(q) == 21 and q[0] == pytest.approx(10) and q[-1] == pytest.approx(20)
    assert q == sorted(q)
    # unknown token counts: no histogram, the ITL quantiles still come from the shared total
    tl2 = Timeline(t_send=0.0)
    for i in range(4):
        tl2.add(0.1 * (i + 1), None, True)
    m2 = timeline_metrics(tl2, 8)
    assert "chunk_tokens_hist" not in m2 and m2["itl_quantiles_ms"][10] == pytest.approx(50.0)


def test_text_mode_needs_more_than_one_chunk_pair() -> None:
    """Cumulative text may repeat (incomplete UTF-8); a delta may start like the text so far; an empty text
    says nothing. The mode is settled on the whole stream, and output_ids lengths decide where they can."""
    from ddtree_tui.bench.client import _Acc, _handle_generate, end_of_stream

    def run(chunks: list[tuple[str, int, list[int] | None]]) -> _Acc:
        acc = _Acc(0.0)
        for i, (text, ct, ids) in enumerate(chunks):
            obj: dict = {"text": text, "meta_info": {"completion_tokens": ct, "finish_reason": None}}
            if ids is not None:
                obj["output_ids"] = ids
            if i == len(chunks) - 1:
                obj["meta_info"]["finish_reason"] = {"type": "length", "length": ct}
            _handle_generate(acc, obj, 0.01 * (i + 1))
        acc.done = True
        end_of_stream(acc, "generate", 1.0)
        return acc

    a = run([("ab", 1, None), ("ab", 2, None), ("abc", 3, None)])  # cumulative with a repeat
    assert (a.text_mode, a.acc_text) == ("cumulative", "abc")
    b = run([("ab", 1, None), ("ab", 2, None), ("abc", 3, None), ("d", 4, None)])  # deltas after all
    assert (b.text_mode, b.acc_text) == ("incremental", "abababcd")
    c = run([("a", 1, [1]), ("ab", 2, [2])])  # looks cumulative, but the ids say deltas
    assert (c.text_mode, c.acc_text) == ("incremental", "aab")
    d = run([("", 1, None), ("你", 2, None), ("你好", 3, None)])
    assert (d.text_mode, d.acc_text) == ("cumulative", "你好")
    assert [ch.has_text for ch in d.tl.chunks] == [False, True, True]

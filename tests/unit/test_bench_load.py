"""The load grammar (bench/load.py), the level arithmetic (goodput, TPOT, saturation) and the verdicts on a
known difference, on none, and on the reference deployment's own claim."""

from __future__ import annotations

import pytest

from ddtree_tui.bench import stats
from ddtree_tui.bench.levels import (
    LevelService,
    Pctl,
    compare,
    level_service,
    meets_slo,
    saturation,
    tpot_s,
)
from ddtree_tui.bench.load import (
    LoadError,
    Slo,
    parse_duration,
    parse_load,
    parse_slo,
    shape_params,
    sweep_levels,
)
from ddtree_tui.bench.models import BenchTarget, RequestResult

T = BenchTarget(ref="h/a", base_url="http://127.0.0.1:1", algorithm="dflash", mode="linear")


def _r(svc: str, pid: str, tok_s: float, ttft: float = 0.1, e2e: float = 1.0, n: int = 100, ok: bool = True):
    return RequestResult(
        service=svc, algorithm="dflash", mode="linear", prompt_id=pid, repeat=0, seq=0, started_at=0.0,
        ok=ok, tok_s=tok_s, ttft_s=ttft, e2e_s=e2e, output_tokens=n, spec_verify_ct=25,
    )  # fmt: skip


def test_parse_load_shapes() -> None:
    assert parse_load("sync").levels == [1.0] and parse_load("sync").closed_loop
    c = parse_load("concurrency:1,2,4,8,16,32")
    assert c.kind == "concurrency" and c.levels == [1, 2, 4, 8, 16, 32] and c.label(4) == "c=4"
    r = parse_load("rate:2.5")
    assert r.kind == "rate" and r.levels == [2.5] and not r.closed_loop and r.label(2.5) == "2.5 req/s"
    p = parse_load("poisson:4,7")
    assert (p.kind, p.levels, p.seed) == ("poisson", [4.0], 7)
    assert parse_load("poisson:4").seed is None
    s = parse_load("sweep")
    assert s.levels == sweep_levels() and s.levels[:4] == [1, 2, 4, 8]
    for text in ("sync", "concurrency:1,2", "rate:3", "poisson:4,7", "sweep"):
        assert parse_load(parse_load(text).text) == parse_load(text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("burst", "expected sync"),
        ("concurrency:", "expected sync"),
        ("concurrency:1,x", "'x' is not a whole number"),
        ("concurrency:0", "'0' is not a whole number"),
        ("concurrency:1,,2", "empty value"),
        ("rate:-1", "must be above 0"),
        ("rate:fast", "not a number"),
        ("poisson:4,x", "seed 'x'"),
        ("poisson:4,1,2", "optional seed"),
    ],
)
def test_parse_load_errors_name_the_option(text: str, needle: str) -> None:
    with pytest.raises(LoadError) as e:
        parse_load(text)
    assert str(e.value).startswith("--load ") and needle in str(e.value)


def test_parse_duration_and_slo() -> None:
    assert parse_duration("30m") == 1800 and parse_duration("90") == 90 and parse_duration("2h") == 7200
    assert parse_duration("1.5s") == 1.5
    for bad in ("", "ten", "5x", "0"):
        with pytest.raises(LoadError, match="--duration"):
            parse_duration(bad)
    assert parse_slo("ttft=200ms,tpot=20ms") == Slo(ttft_ms=200, tpot_ms=20)
    assert parse_slo("e2e=2s").e2e_ms == 2000
    for bad in ("", "ttft", "speed=3ms", "ttft=fast"):
        with pytest.raises(LoadError, match="--slo"):
            parse_slo(bad)


def test_tpot_goodput_and_level_numbers() -> None:
    fast = _r("h/a", "p", 100, ttft=0.1, e2e=1.09, n=100)  # TPOT = 0.99 / 99 = 10 ms
    slow = _r("h/a", "p", 50, ttft=0.5, e2e=2.0, n=100)
    failed = _r("h/a", "p", 0, ok=False)
    assert tpot_s(fast) == pytest.approx(0.01)
    slo = Slo(ttft_ms=200, tpot_ms=20)
    assert meets_slo(fast, slo) and not meets_slo(slow, slo) and not meets_slo(failed, slo)
    ls = level_service(T, [fast, slow, failed], busy=2.0, slo=slo, offered=None)
    assert ls.n == 2 and ls.failed == 1 and ls.error_rate == pytest.approx(1 / 3)
    assert ls.output_throughput == pytest.approx(100.0) and ls.request_throughput == pytest.approx(1.0)
    assert ls.goodput_rps == pytest.approx(0.5) and ls.goodput_pct == pytest.approx(100 / 3)
    assert ls.accept_length == pytest.approx(4.0)
    assert ls.ttft_ms.p50 == pytest.approx(300.0)


def _lv(
    thr: float, e2e: float, ttft: float = 50.0, rate: float | None = None, rps: float = 1.0
) -> LevelService:
    return LevelService(
        service="h/a", algorithm="dflash", mode="linear", output_throughput=thr, request_throughput=rps,
        e2e_ms=Pctl(p50=e2e), ttft_ms=Pctl(p50=ttft), offered_rate=rate,
    )  # fmt: skip


def test_saturation_rule() -> None:
    # throughput still rising: not saturated, however latency moves
    assert saturation(_lv(100, 200), _lv(190, 300), closed_loop=True) is None
    # flat throughput, latency climbing: saturated, and the reason says both
    why = saturation(_lv(700, 300), _lv(720, 600), closed_loop=True)
    assert why is not None and "output throughput +2.9 %" in why and "median e2e +100.0 %" in why
    # flat throughput without a latency climb (e.g. noise): not saturated
    assert saturation(_lv(700, 300), _lv(705, 310), closed_loop=True) is None
    # open loop: the offered rate is not served and TTFT climbs
    why = saturation(_lv(100, 0, ttft=50), _lv(150, 0, ttft=400, rate=20, rps=12), closed_loop=False)
    assert why is not None and "12.00 of 20 req/s" in why
    assert saturation(None, _lv(1, 1), closed_loop=True) is None


def test_verdict_on_a_known_difference() -> None:
    base = [_r("h/a", p, v) for p in ("p1", "p2", "p3") for v in (100, 101, 99, 100.5, 99.5)]
    slower = [_r("h/b", p, v * 0.9) for p in ("p1", "p2", "p3") for v in (100, 101, 99, 100.5, 99.5)]
    d = compare(base, slower)
    assert d.measurable and d.pct == pytest.approx(-10.0, abs=0.01)
    text = stats.verdict(d, subject="h/b")
    assert text.startswith("h/b slower by 10.0 % ± ") and "95 % CI −" in text and "n=15" in text


def test_verdict_on_no_difference() -> None:
    vals = (100, 104, 96, 102, 98)
    base = [_r("h/a", "p", v) for v in vals]
    same = [_r("h/b", "p", v) for v in reversed(vals)]
    d = compare(base, same)
    assert not d.measurable and d.pct == pytest.approx(0.0, abs=1e-9)
    assert stats.verdict(d, subject="h/b").startswith("no measurable difference (Δ 0.0 %, 95 % CI −")


def test_the_reference_claim_is_a_sentence_this_can_back_or_refute() -> None:
    # "shadow-linear adds no measurable overhead": 140.6 vs 140.4, 96.8 vs 94.6, 109.0 vs 106.5 tok/s
    # (DFlash first, shadow-linear second, one request a prompt): a paired t over the three prompts
    base = [_r("dflash", "p1", 140.6), _r("dflash", "p2", 96.8), _r("dflash", "p3", 109.0)]
    shadow = [_r("shadow", "p1", 140.4), _r("shadow", "p2", 94.6), _r("shadow", "p3", 106.5)]
    d = compare(base, shadow)
    assert d.method == "t-paired" and d.n == 3
    # Δ is of the column's number: mean 113.83 vs 115.47 tok/s over the three prompts
    assert d.pct == pytest.approx((113.8333 - 115.4667) / 115.4667 * 100, abs=0.01)
    text = stats.verdict(d, subject="shadow")
    # the interval holds zero: "no measurable difference" is what three requests can say, with its CI
    assert text == "no measurable difference (Δ −1.4 %, 95 % CI −4.1 … +1.3 %, n=3)"
    assert "n=3" in text
    # the same 1.6 % measured as tightly as five repeats a prompt would have been is a measurable overhead
    base5 = [_r("dflash", r.prompt_id, r.tok_s * f) for r in base for f in (1.0, 1.002, 0.998, 1.001, 0.999)]
    shadow5 = [
        _r("shadow", r.prompt_id, r.tok_s * f) for r in shadow for f in (1.0, 1.002, 0.998, 1.001, 0.999)
    ]
    d5 = compare(base5, shadow5)
    assert d5.measurable and stats.verdict(d5, subject="shadow").startswith("shadow slower by 1.4 %")


def test_plain_run_summary_delta_agrees_with_its_column_and_has_a_verdict() -> None:
    from ddtree_tui.bench.metrics import summarize

    a = BenchTarget(ref="h/a", base_url="http://127.0.0.1:1", algorithm="dflash", mode="linear")
    b = BenchTarget(ref="h/b", base_url="http://127.0.0.1:2", algorithm="ddtree", mode="tree")
    rs = [_r("h/a", p, v) for p in ("p1", "p2") for v in (100, 102, 98)]
    rs += [_r("h/b", p, v * 1.2) for p in ("p1", "p2") for v in (100, 102, 98)]
    _, summary = summarize(rs, [a, b], ["p1", "p2"], baseline="h/a")
    sa, sb = summary
    assert sa.tok_s_mean == pytest.approx(100.0) and sb.tok_s_mean == pytest.approx(120.0)
    assert sb.delta_tok_s_pct == pytest.approx((sb.tok_s_mean / sa.tok_s_mean - 1) * 100)
    assert sb.delta_method == "bootstrap" and sb.delta_tok_s_lo_pct > 10 and sb.delta_tok_s_hi_pct < 30
    assert sb.delta_verdict.startswith("h/b faster by 20.0 % ± ")
    assert sa.delta_verdict is None


def test_dialog_fields_parse_like_the_cli() -> None:
    assert shape_params() is None  # every field blank: a plain run
    p = shape_params("Concurrency:1,2,4", requests="16", slo="ttft=0.2s", max_new_tokens=64)
    assert p is not None and (p.load, p.requests, p.slo, p.soak) == (
        "concurrency:1,2,4",
        16,
        "ttft=200ms",
        False,
    )
    p = shape_params("poisson:4,7", duration="30s")
    assert p is not None and (p.load, p.duration_s, p.requests) == ("poisson:4,7", 30.0, None)
    p = shape_params(soak="30m", window="5s")
    assert p is not None and (p.load, p.soak, p.duration_s, p.window_s) == ("sync", True, 1800.0, 5.0)
    p = shape_params(sessions="4", think_time="1.5s")
    assert p is not None and (p.sessions, p.think_time_s, p.soak) == (4, 1.5, False)
    for kw, msg in (
        ({"load": "zigzag:4"}, "expected sync, concurrency"),
        ({"load": "sync", "requests": "4", "duration": "5s"}, "not both"),
        ({"soak": "1m", "requests": "3"}, "not a number of requests"),
        ({"window": "5s"}, "needs a soak duration"),
        ({"sessions": "2", "load": "sync"}, "leave load and soak blank"),
        ({"sessions": "two"}, "sessions 'two'"),
        ({"sessions": "100000"}, "sessions '100000': a whole number 1…4096"),
        ({"requests": "0"}, "at least 1"),
        ({"slo": "ttft=fast"}, "is not a time"),
    ):
        with pytest.raises(LoadError, match=msg):
            shape_params(**kw)  # type: ignore[arg-type]

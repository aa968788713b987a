"""Every recorded stream scored as the real server meant it: SGLang 0.5.23's own serializers
(tests/fixtures/sglang/0.5.23/streams.json, made by scripts/gen_sglang_contract.py) and the shapes of other
OpenAI-compatible servers (tests/fixtures/openai_compat/), replayed byte for byte with their timing by a real
HTTP server on loopback, through the benchmark's own client."""

from __future__ import annotations

from typing import Any

import pytest

from ddtree_tui.bench.client import measure_request
from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.stream import StreamClient
from tests.replay_server import ReplayServer, openai_compat_cases, sglang_cases

pytestmark = pytest.mark.timeout(60)
SGLANG = sglang_cases()
OTHER = openai_compat_cases()
PROMPT = Prompt(id="p", title="p", messages=[{"role": "user", "content": "hi"}])


async def measure(
    srv: ReplayServer, case: dict, *, model: str | None = None, ignore_eos: bool = False
) -> tuple[RequestResult, str]:
    """One request through the bench client (the one place that calls measure_request here)."""
    srv.case = case
    target = BenchTarget(ref="h/s", base_url=srv.url, algorithm="dflash", mode="linear", model=model)
    sp = SamplingParams(max_new_tokens=32, api=case["api"], ignore_eos=ignore_eos)
    texts: list[str] = []
    async with StreamClient(connect_timeout=10) as client:
        await client.get(srv.url + "/v1/models")  # connect first: the recording's times start at the request
        r = await measure_request(client, target, PROMPT, sp, timeout=10, on_text=texts.append)
    return r, texts[0] if texts else ""


def check_expect(r: RequestResult, text: str, exp: dict) -> None:
    assert r.ok is exp["ok"], (r.error, exp)
    if "output_tokens" in exp:
        assert r.output_tokens == exp["output_tokens"], r
    if "text" in exp:
        assert text == exp["text"]
    if "finish_reason" in exp:
        assert r.finish_reason == exp["finish_reason"]
    if "text_mode" in exp:
        assert r.text_mode == exp["text_mode"]
    if "status_code" in exp:
        assert r.status_code == exp["status_code"], r
    if "error_contains" in exp:
        assert exp["error_contains"] in (r.error or ""), r.error
    if "tokens_source" in exp:
        assert r.tokens_source == exp["tokens_source"]
    if "accept_length" in exp:
        assert r.accept_length == pytest.approx(exp["accept_length"])
    # times are the recording's, give or take scheduling on a loaded CI box
    if "ttft_s" in exp:
        assert exp["ttft_s"] - 0.005 <= r.ttft_s <= exp["ttft_s"] + 0.15, r.ttft_s
    if "first_answer_s" in exp:
        assert exp["first_answer_s"] - 0.005 <= r.first_answer_s <= exp["first_answer_s"] + 0.15
        gap = exp["first_answer_s"] - exp["ttft_s"]
        assert gap - 0.03 <= r.first_answer_s - r.ttft_s <= gap + 0.1


@pytest.mark.parametrize(
    "case, sglang",
    [pytest.param(SGLANG[n], True, id=f"sglang-0.5.23-{n}") for n in sorted(SGLANG)]
    + [pytest.param(OTHER[n], False, id=f"other-{n}") for n in sorted(OTHER)],
)
async def test_recorded_streams_scored_right(case: dict[str, Any], sglang: bool) -> None:
    """SGLang 0.5.23's streams and other OpenAI-compatible servers', each scored as its expectation says."""
    async with ReplayServer() as srv:
        r, text = await measure(srv, case)
    check_expect(r, text, case["expect"])
    if sglang and not r.ok:
        assert r.tok_s is None or r.aborted or r.error  # a failure is a failure, whatever it measured


async def test_abort_is_a_failure_with_status_even_after_done() -> None:
    async with ReplayServer() as srv:
        r, _ = await measure(srv, SGLANG["generate_abort_503"])
    assert not r.ok and r.aborted and r.status_code == 503
    assert r.error.startswith("aborted by the server (503): Retracted under decode memory pressure")


async def test_reasoning_counts_for_ttft_and_itl() -> None:
    async with ReplayServer() as srv:
        r, text = await measure(srv, SGLANG["chat_reasoning"])
    assert text == "Hello! How can I help?"
    # thinking is output: TTFT is the first reasoning chunk's (0.05 s in the recording), not the answer's (0.204 s).
    # Said as an order, not as wall-clock bounds: the server shares the test's loop, and a busy CI machine read
    # 0.117 s for the first chunk once.
    assert r.ttft_s < r.first_answer_s, (r.ttft_s, r.first_answer_s)
    assert r.chunks == 5 and r.reasoning_chars > 0
    # 20 tokens over 5 chunks in 0.185 s: ITL around 10 ms, not the ~0.02 ms of crediting them all to one chunk
    assert 3 < r.itl_p50_ms < 30, r.itl_p50_ms
    assert r.tokens_source == "usage-estimated"


async def test_usage_on_the_finish_chunk_is_spread_not_credited_to_it() -> None:
    async with ReplayServer() as srv:
        r, _ = await measure(srv, OTHER["usage_on_finish_no_done"])
    assert r.ok and r.output_tokens == 10 and r.finish_reason == "stop"
    # 9 text chunks 20 ms apart carrying 10 tokens: ITL ~ 18 ms a token (before: ~0.04 ms, 500x too small)
    assert 8 < r.itl_p50_ms < 40, r.itl_p50_ms
    assert r.tokens_per_chunk == pytest.approx(10 / 9, rel=0.01)


async def test_repeated_cumulative_chunk_does_not_garble_text() -> None:
    async with ReplayServer() as srv:
        r, text = await measure(srv, SGLANG["generate_repeated_text"])
    assert text == "你好世界😀!" and r.text_mode == "cumulative"
    assert r.output_tokens == 8 and r.chunks == 5  # the repeated chunk brought a token, no character yet


async def test_model_from_v1_models_and_no_ignore_eos_on_openai() -> None:
    async with ReplayServer() as srv:
        srv.models = ["Qwen/Qwen3-0.6B"]
        from ddtree_tui.bench.models import BenchRequest
        from ddtree_tui.bench.runner import run_bench

        srv.case = OTHER["usage_on_finish_no_done"]
        req = BenchRequest(prompts=[PROMPT], api="chat", warmup=0, max_new_tokens=16)
        run = await run_bench(req, [BenchTarget(ref="x/y", base_url=srv.url, algorithm="baseline")])
        assert run.failed == 0, [r.error for r in run.results]
        path, body = srv.requests[-1]
        assert path == "/v1/chat/completions"
        assert body["model"] == "Qwen/Qwen3-0.6B" and "ignore_eos" not in body
        # --model wins; --ignore-eos sends it
        _r, _ = await measure(srv, OTHER["usage_on_finish_no_done"], model="pinned", ignore_eos=True)
        assert srv.requests[-1][1]["model"] == "pinned" and srv.requests[-1][1]["ignore_eos"] is True
        # /generate always carries it (false unless asked)
        await measure(srv, SGLANG["generate_cumulative"])
        assert srv.requests[-1][1]["sampling_params"]["ignore_eos"] is False


async def test_error_bodies_detail_and_error_both_shown() -> None:
    async with ReplayServer() as srv:
        a, _ = await measure(srv, OTHER["detail_422"])
        b, _ = await measure(srv, OTHER["error_object_400"])
    assert a.error == "HTTP 422: body.ignore_eos: Extra inputs are not permitted" and a.status_code == 422
    assert b.error == "HTTP 400: max_tokens is too large"

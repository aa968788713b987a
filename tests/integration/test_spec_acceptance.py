"""Per-request speculative acceptance (issue 26), read by the bench client through real sockets under
SGLang 0.5.23's own field names: /generate's final meta_info (the recorded contract), the OpenAI APIs'
`sglext.spec_tokens_details` chunk (SpecTokensDetails of entrypoints/openai/protocol.py, sent choice-less after
the finish chunk with `usage: null`), a count-only meta_info; the simulator sending them in both APIs with a
spread that depends on the prompt; and the per-service summary (bench/acceptance.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ddtree_tui.bench.acceptance import histogram, join, summarize
from ddtree_tui.bench.client import measure_request
from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams
from ddtree_tui.bench.prompts import Prompt, load_prompts
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer
from tests.replay_server import ReplayServer, sglang_cases

pytestmark = pytest.mark.timeout(60)
PROMPT = Prompt(id="p", title="p", messages=[{"role": "user", "content": "hi"}])
RID = "5f1c0a7e2b9d4c3e8a6f1b2c3d4e5f60"
# SpecTokensDetails as 0.5.23's model_dump_json writes it (every field, in its order), 7 tokens in 3 passes
DETAILS = {
    "spec_accept_rate": 4 / 45,
    "spec_accept_length": 7 / 3,
    "spec_cap_length": 0.0,
    "spec_block_accept_length": 0.0,
    "spec_num_correct_drafts": 4,
    "spec_num_proposed_drafts": 45,
    "spec_verify_ct": 3,
    "spec_correct_drafts_histogram": [],
    "spec_cap_lens_histogram": [],
}


def _sglext_chunk(details: object) -> dict[str, Any]:
    body = {
        "id": RID, "object": "chat.completion.chunk", "created": 1767225600, "model": "default", "choices": [],
        "usage": None, "sglext": {"spec_tokens_details": details},
    }  # fmt: skip
    return {"t": 0.099, "data": "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"}


def _chat_with(details: object) -> dict[str, Any]:
    """The recorded chat stream with the sglext chunk where serving_chat.py puts it: before the usage."""
    case = copy.deepcopy(sglang_cases()["chat_usage_last"])
    usage_at = next(i for i, e in enumerate(case["events"]) if '"usage":{' in e["data"])
    case["events"].insert(usage_at, _sglext_chunk(details))
    return case


async def _measure(srv: ReplayServer, case: dict[str, Any], api: str, spec_details: bool) -> RequestResult:
    srv.case = case
    target = BenchTarget(ref="h/s", base_url=srv.url, algorithm="dflash", mode="linear")
    sp = SamplingParams(max_new_tokens=32, api=api, spec_details=spec_details)  # type: ignore[arg-type]
    async with StreamClient(connect_timeout=10) as client:
        return await measure_request(client, target, PROMPT, sp, timeout=10)


async def test_openai_sglext_spec_tokens_details_are_read_from_their_own_chunk() -> None:
    async with ReplayServer(scale=0.1) as srv:
        r = await _measure(srv, _chat_with(DETAILS), "chat", spec_details=True)
        assert r.ok and r.output_tokens == 7, r.error
        assert r.spec_verify_ct == 3 and r.accept_length == pytest.approx(7 / 3)
        assert r.accept_rate == pytest.approx(4 / 45)
        assert srv.requests[-1][1]["return_spec_tokens_details"] is True
        # n > 1 sends a list; the bench asks for one choice and reads the first
        r = await _measure(srv, _chat_with([DETAILS, {**DETAILS, "spec_verify_ct": 1}]), "chat", True)
        assert r.spec_verify_ct == 3
        # not asked: the field is not sent (strict servers refuse it) and there is nothing to read
        r = await _measure(srv, sglang_cases()["chat_usage_last"], "chat", spec_details=False)
        assert "return_spec_tokens_details" not in srv.requests[-1][1]
        assert r.ok and r.accept_length is None and r.spec_verify_ct is None


async def test_generate_meta_info_real_names_and_a_count_only_reply() -> None:
    async with ReplayServer(scale=0.1) as srv:
        case = sglang_cases()["generate_cumulative"]  # 0.5.23's own serializer: 10 tokens, 4 verify passes
        r = await _measure(srv, case, "generate", spec_details=False)
        assert (r.spec_verify_ct, r.accept_length, r.accept_rate) == (4, 2.5, 0.1)
        assert "return_spec_tokens_details" not in srv.requests[-1][1]  # /generate always has meta_info
        # a build that sends only the count: accept length = completion_tokens / spec_verify_ct
        only = copy.deepcopy(case)
        last = only["events"][-2]
        for key in (
            "spec_accept_length",
            "spec_accept_rate",
            "spec_num_correct_drafts",
            "spec_num_proposed_drafts",
        ):
            last["data"] = last["data"].replace(f'"{key}"', f'"x_{key}"')
        r = await _measure(srv, only, "generate", spec_details=False)
        assert (
            r.ok and r.spec_verify_ct == 4 and r.accept_length == pytest.approx(2.5) and r.accept_rate is None
        )


async def test_the_sim_sends_spec_details_in_both_apis_with_a_spread_by_prompt() -> None:
    prompts = load_prompts("seed3")
    cfg = SimConfig(decode_rate=4000, seed=5, accept_length=3.4)
    async with SimServer(cfg) as s, StreamClient() as client:
        target = BenchTarget(ref="x/y", base_url=s.base_url, algorithm="dflash", mode="linear")
        got: dict[tuple[str, str], RequestResult] = {}
        for p in prompts:
            for api in ("generate", "chat", "completions"):
                sp = SamplingParams(max_new_tokens=200, api=api, spec_details=True)  # type: ignore[arg-type]
                r = await measure_request(client, target, p, sp, timeout=20)
                assert r.ok and r.spec_verify_ct and r.accept_length, (api, r.error)
                assert r.accept_length == pytest.approx(200 / r.spec_verify_ct)
                got[(p.id, api)] = r
        # each prompt's schedule is the sim's ground truth, the same whichever API carried it
        for p in prompts:
            n = len(cfg.schedule(p.as_text(), 200))
            assert got[(p.id, "generate")].spec_verify_ct == n
        # the prompts differ in how well they are drafted (modelled, seeded by the prompt)
        means = {p.id: cfg.prompt_accept_length(p.as_text()) for p in prompts}
        assert len({round(m, 3) for m in means.values()}) == len(prompts)
        assert all(abs(m - 3.4) <= 2.4 * cfg.accept_spread + 1e-9 for m in means.values())
        assert SimConfig(accept_spread=0).prompt_accept_length(prompts[0].as_text()) == 3.4


def _res(service: str, accept: float | None, tok_s: float, verify: int | None = None) -> RequestResult:
    return RequestResult(
        service=service, algorithm="dflash", mode="linear", prompt_id="p", repeat=0, seq=0, started_at=0.0,
        accept_length=accept, spec_verify_ct=verify, output_tokens=100, tok_s=tok_s, ttft_s=0.05,
        itl_mean_ms=1000 / tok_s,
    )  # fmt: skip


def test_summary_histogram_and_correlation() -> None:
    rs = [_res("a", 2.0 + i / 4, 100 + 25 * i, verify=round(100 / (2.0 + i / 4))) for i in range(8)]
    rs.append(_res("a", None, 50))  # no spec numbers: counted apart
    rs.append(_res("b", None, 50))  # a service without: no summary
    (s,) = summarize(rs, ["a", "b"])
    assert s.service == "a" and s.n == 8 and s.without == 1
    assert s.min == 2.0 and s.max == 3.75 and s.median == pytest.approx(2.875)
    assert sum(b.n for b in s.histogram) == 8 and s.histogram[0].lo == 2.0
    tok = next(j for j in s.joins if j.metric == "tok_s")
    assert tok.pearson == pytest.approx(1.0) and tok.spearman == pytest.approx(1.0)
    assert tok.slope == pytest.approx(100.0)  # +25 tok/s per +0.25 accept length
    itl = next(j for j in s.joins if j.metric == "itl_mean_ms")
    assert itl.spearman == pytest.approx(-1.0)
    assert s.mean == pytest.approx(800 / sum(r.spec_verify_ct or 0 for r in rs[:8]))


def test_histogram_and_join_edges() -> None:
    assert histogram([]) == []
    assert [(b.lo, b.n) for b in histogram([3.0, 3.0, 3.3])] == [(3.0, 2), (3.25, 1)]  # 0.25-token bins
    flat = join([3.0, 3.0, 3.0], [1.0, 2.0, 3.0], "tok_s")
    assert flat.pearson is None and flat.n == 3

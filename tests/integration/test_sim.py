"""The simulated SGLang server, over real HTTP on 127.0.0.1: endpoints, stream formats, log lines, faults,
a real child process (banner, SIGTERM, exit fault)."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import signal
import time

import pytest

from ddtree_tui.bench.servermetrics import parse_metrics, prometheus_window
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess
from ddtree_tui.sim.server import SimServer
from tests import httpc
from tests.util import sse_events, until

LOG_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] ")


async def test_health_loads_then_serves_and_info_endpoints() -> None:
    # loading for 3 s, so a busy machine cannot let it finish before the first looks (0.3 s could)
    async with SimServer(SimConfig(algorithm="ddtree", mode="tree", load_time=3), log=lambda s: None) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            r = await c.get("/health")
            assert r.status_code == 503 and r.content == b""
            assert (await c.post("/generate", json={"text": "x"})).status_code == 503
            await until(lambda: not s.loading, 20, "the load time to pass")
            r = await c.get("/health")
            assert r.status_code == 200 and r.content == b""
            for path in ("/server_info", "/get_server_info"):
                info = (await c.get(path)).json()
                assert info["speculative_algorithm"] == "DDTREE" and info["simulated"] is True
                assert info["version"].endswith("-sim") and info["port"] == s.port and info["tp_size"] == 1
                assert set(info["internal_states"][0]) == {"avg_spec_accept_length", "last_gen_throughput"}
                assert info["sim"]["mode"] == "tree"
            for path in ("/model_info", "/get_model_info"):
                assert (await c.get(path)).json()["model_path"] == "sim/Qwen3.6-35B-A3B"
            assert (await c.get("/v1/models")).json()["data"][0]["id"] == "sim/Qwen3.6-35B-A3B"
            assert (await c.post("/flush_cache")).status_code == 200


async def test_baseline_server_info_has_no_speculation() -> None:
    async with SimServer(SimConfig(algorithm="baseline"), log=lambda s: None) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            info = (await c.get("/server_info")).json()
            assert info["speculative_algorithm"] is None
            r = await c.post("/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 3}})
            meta = r.json()["meta_info"]
            assert meta["completion_tokens"] == 3 and "spec_verify_ct" not in meta


async def test_generate_stream_cumulative_and_incremental_and_logs() -> None:
    lines: list[str] = []
    cfg = SimConfig(decode_rate=2000, accept_length=3.0, decode_log_interval=5, seed=3)
    sched = cfg.schedule("hello", 40)
    async with SimServer(cfg, log=lines.append) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            body = {"text": "hello", "sampling_params": {"max_new_tokens": 40}, "stream": True}
            chunks = sse_events((await c.post("/generate", json=body)).text)
            assert chunks[-1] == "[DONE]"
            data = chunks[:-1]
            assert len(data) == len(sched)
            assert [d["meta_info"]["completion_tokens"] for d in data] == [
                sum(sched[: i + 1]) for i in range(len(sched))
            ]
            for a, b in itertools.pairwise(data):
                assert b["text"].startswith(a["text"]) and len(b["text"]) > len(a["text"])
            last = data[-1]["meta_info"]
            assert last["finish_reason"] == {"type": "length", "length": 40}
            assert last["spec_verify_ct"] == len(sched)
            assert last["spec_accept_length"] == pytest.approx(40 / len(sched))
            assert 0 <= last["spec_accept_rate"] <= 1 and last["e2e_latency"] > 0
            assert data[0]["meta_info"]["finish_reason"] is None and "e2e_latency" not in data[0]["meta_info"]
            # the same prompt again hits the prefix cache
            again = sse_events((await c.post("/generate", json=body)).text)
            assert again[0]["meta_info"]["cached_tokens"] > 0
            metrics = (await c.get("/metrics")).text
    for name in (
        "sglang:num_running_reqs",
        "sglang:gen_throughput",
        "sglang:spec_accept_length",
        "sglang:generation_tokens_total",
        "sglang:time_to_first_token_seconds_bucket",
    ):
        assert name in metrics
    assert 'sglang:generation_tokens_total{model_name="sim/Qwen3.6-35B-A3B",tp_rank="0"} 80.0' in metrics
    assert all(LOG_RE.match(ln) for ln in lines)
    decode = [ln for ln in lines if "Decode batch" in ln]
    assert decode and "accept len: " in decode[0] and "gen throughput (token/s): " in decode[0]
    assert "cuda graph: True" in decode[0] and "#running-req: " in decode[0] and "#queue-req: 0" in decode[0]
    assert any("Prefill batch, #new-seq: 1, #new-token: " in ln for ln in lines)

    cfg_inc = cfg.model_copy(update={"incremental_streaming_output": True})
    async with SimServer(cfg_inc, log=lambda s: None) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            data = sse_events((await c.post("/generate", json=body)).text)[:-1]
            assert "".join(d["text"] for d in data) == chunks[-2]["text"]


async def test_openai_streams_with_usage() -> None:
    async with SimServer(SimConfig(decode_rate=2000), log=lambda s: None) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            body = {
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 20,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            ch = sse_events((await c.post("/v1/chat/completions", json=body)).text)
            assert ch[-1] == "[DONE]"
            assert ch[-2]["choices"] == [] and ch[-2]["usage"]["completion_tokens"] == 20
            assert ch[0]["choices"][0]["delta"]["role"] == "assistant"
            assert ch[-3]["choices"][0]["finish_reason"] == "length"
            body2 = {"prompt": "hi", "max_tokens": 7, "stream": True}
            ch2 = sse_events((await c.post("/v1/completions", json=body2)).text)
            assert all("usage" not in c or c["usage"] is None for c in ch2[:-1])
            assert "".join(c["choices"][0]["text"] for c in ch2[:-1])
            full = (await c.post("/v1/chat/completions", json={**body, "stream": False})).json()
            assert full["usage"]["completion_tokens"] == 20 and full["choices"][0]["message"]["content"]


async def test_faults_per_request() -> None:
    async with SimServer(SimConfig(decode_rate=2000), log=lambda s: None) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            body = {"text": "x", "sampling_params": {"max_new_tokens": 30}, "stream": True}
            r = await c.post("/generate", json=body, headers={"X-Sim-Fault": "http500"})
            assert r.status_code == 500 and "error" in r.json()
            r = await c.post("/generate", json={**body, "sim_fault": "malformed"})
            assert "this chunk is not json" in r.text and r.text.endswith("data: [DONE]\n\n")
            with pytest.raises(httpc.DROPPED):
                await c.post("/generate", json=body, headers={"X-Sim-Fault": "drop=5"})
            t0 = time.monotonic()
            r = await c.post("/generate", json=body, headers={"X-Sim-Fault": "slow_first_token=0.3"})
            assert time.monotonic() - t0 >= 0.3 and r.status_code == 200
            with pytest.raises(TimeoutError):
                await c.post(
                    "/generate", json=body, headers={"X-Sim-Fault": "slow_first_token=1.5"}, timeout=0.3
                )
            assert (await c.post("/generate", json=body, headers={"X-Sim-Fault": "bogus"})).status_code == 400


def _metric(text: str, name: str) -> float:
    """The value of one unlabelled-or-labelled sample `name` in a /metrics page."""
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert m is not None, f"{name} not in /metrics"
    return float(m.group(1))


async def test_requests_are_counted_when_they_finish_as_sglang_does() -> None:
    """SGLang 0.5.23 counts num_requests_total and prompt_tokens_total in observe_one_finished_request: a
    request still running (here: before its first token) is not in them; once it has finished, it is."""
    async with SimServer(SimConfig(decode_rate=2000), log=lambda s: None) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            body = {"text": "count me", "sampling_params": {"max_new_tokens": 30}, "stream": True}
            late = {"X-Sim-Fault": "slow_first_token=1.5"}  # running, without a token, for 1.5 s
            slow = asyncio.ensure_future(c.post("/generate", json=body, headers=late, timeout=30))

            async def metrics_when(running: int, what: str) -> str:
                for _ in range(400):  # bounded: 20 s
                    text = (await c.get("/metrics")).text
                    if _metric(text, "sglang:num_running_reqs") == running:
                        return text
                    await asyncio.sleep(0.05)
                raise AssertionError(f"timed out waiting for {what}")

            mid = await metrics_when(1, "the request to run")
            assert _metric(mid, "sglang:num_requests_total") == 0
            assert _metric(mid, "sglang:prompt_tokens_total") == 0
            assert (await slow).status_code == 200
            end = await metrics_when(0, "the request to end")
            assert _metric(end, "sglang:num_requests_total") == 1
            assert _metric(end, "sglang:prompt_tokens_total") > 0


async def _leave_after_first_chunk(base_url: str, max_new_tokens: int) -> None:
    """A streaming /generate whose client reads its first chunk and goes away (closes the socket)."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    body = json.dumps(
        {"text": "leave early", "sampling_params": {"max_new_tokens": max_new_tokens}, "stream": True}
    )
    writer.write(
        f"POST /generate HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n{body}".encode()
    )
    await writer.drain()
    got = b""
    while b"data:" not in got:  # the first chunk: the request is running
        more = await asyncio.wait_for(reader.read(4096), 20)
        assert more, "the server closed before the first chunk"
        got += more
    writer.close()


async def _metrics_when_idle(c: httpc.AClient) -> str:
    for _ in range(600):  # bounded: 30 s
        text = (await c.get("/metrics")).text
        if _metric(text, "sglang:num_running_reqs") == 0:
            return text
        await asyncio.sleep(0.05)
    raise AssertionError("a request the client left never ended")


async def test_a_client_disconnect_is_an_abort_and_a_finished_request_as_in_sglang() -> None:
    """SGLang 0.5.23: a streaming client that goes away is aborted by the tokenizer manager's abort_request
    (from the response's background abort task), which counts it in num_aborted_requests_total; the
    scheduler's abort finish then reaches collect_metrics, so it is in num_requests_total too, with the tokens
    it got out."""
    async with SimServer(SimConfig(decode_rate=50), log=lambda s: None) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            first = parse_metrics((await c.get("/metrics")).text, 0.0)
            await _leave_after_first_chunk(s.base_url, 400)
            text = await _metrics_when_idle(c)
        assert _metric(text, "sglang:num_aborted_requests_total") == 1
        assert _metric(text, "sglang:num_requests_total") == 1
        assert 0 < _metric(text, "sglang:generation_tokens_total") < 400
        # --server-metrics reads it (prometheus_client's parser) into the window's `aborted`
        last = parse_metrics(text, 2.0)
        assert first is not None and last is not None
        w = prometheus_window("sim", [first, last], 0, 0.0, 1.0, 0.0, last=True)
        assert w.aborted == 1 and w.requests == 1


async def test_a_stream_whose_client_went_decodes_on_until_the_abort_delay_as_sglang_does() -> None:
    """disconnect_abort_s (real 0.5.23: 2 s, create_abort_task): a request the client left decodes on until
    the delay, then aborts; one that finishes first is a finished request, never an aborted one."""
    lines: list[str] = []
    async with SimServer(SimConfig(decode_rate=50, disconnect_abort_s=3.0), log=lines.append) as s:
        async with httpc.AClient(base_url=s.base_url) as c:
            await _leave_after_first_chunk(s.base_url, 2000)  # ~13 s of decode: aborted at 3 s
            await _leave_after_first_chunk(s.base_url, 30)  # well under 3 s: it finishes first
            text = await _metrics_when_idle(c)
    assert _metric(text, "sglang:num_aborted_requests_total") == 1
    assert _metric(text, "sglang:num_requests_total") == 2
    # the long one ran on for the delay (at 50 passes/s, ~150 passes) after its first chunk, then stopped
    gen = _metric(text, "sglang:generation_tokens_total")
    assert 30 + 100 <= gen < 30 + 2000
    assert sum("Abort request rid=" in ln for ln in lines) == 1


@pytest.mark.slow
def test_child_process_banner_sigterm_and_exit_fault() -> None:
    with SimProcess(SimConfig(load_time=0.0, decode_rate=500)) as p:
        assert "SIMULATED" in p.output()
        assert httpc.get(p.base_url + "/server_info").json()["simulated"] is True
        p.proc.send_signal(signal.SIGTERM)
        assert p.proc.wait(timeout=10) == 0
    with SimProcess(SimConfig(load_time=0.0, decode_rate=500, faults=["exit=4"])) as p:
        with pytest.raises(httpc.ERRORS):
            httpc.post(p.base_url + "/generate", json={"text": "x", "stream": True}, timeout=5)
        assert p.proc.wait(timeout=10) != 0

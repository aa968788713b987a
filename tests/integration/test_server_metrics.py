"""Issue 26's server side over real sockets on 127.0.0.1, against the simulator: /metrics scraped during
requests and cut into windows (counts, histogram quantiles, the accept length from the counters, matched
against what the client was told), the Decode batch log as the fallback when /metrics answers 404, no
source at all for a server without a log, and the cache reset (SGLang's refusal while a request runs, the
retry, 0.5.23's wait for idle, vLLM's endpoint, a server with neither)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from aiohttp import web

from ddtree_tui.bench.cacheflush import flush_cache
from ddtree_tui.bench.servermetrics import NAMES, ScrapeTarget, ServerScrape, window_edges
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer
from tests import httpc

N = 6
MAX_NEW = 24


async def _requests(base: str, n: int = N, text: str = "hello there") -> list[dict[str, object]]:
    metas = []
    async with httpc.AClient(base_url=base) as c:
        for i in range(n):
            body = {"text": f"{text} {i}", "sampling_params": {"max_new_tokens": MAX_NEW}}
            r = await c.post("/generate", json=body)
            assert r.status_code == 200
            metas.append(r.json()["meta_info"])
    return metas


async def test_prometheus_scraped_during_requests_and_cut_into_windows() -> None:
    cfg = SimConfig(algorithm="dflash", decode_rate=400, accept_length=3.0, seed=1)
    async with SimServer(cfg, log=lambda s: None) as s:
        origin = time.time()
        async with ServerScrape([ScrapeTarget(ref="h/a", base_url=s.base_url)], every_s=0.1) as sc:
            metas = await _requests(s.base_url)
        span = time.time() - origin
        [whole] = sc.result(origin, window_edges(span, span))
        [halves] = sc.result(origin, window_edges(span, span / 2))
    assert whole.source == "prometheus" and whole.note is None and whole.failures == 0
    assert whole.scrapes >= 2 and whole.url == s.base_url + "/metrics"
    assert set(NAMES) - {"sglang:spec_accept_length", "sglang:spec_accept_rate"} <= set(whole.names) | {
        "sglang:num_queue_reqs"
    }
    [w] = whole.windows
    assert w.source == "prometheus" and w.requests == N and w.generation_tokens == N * MAX_NEW
    assert w.ttft_count == N and w.e2e_count == N and w.ttft_ms_p50 is not None and w.e2e_ms_p99 is not None
    # the accept length of the window: Δ generation tokens / Δ verify calls, what the requests' meta_info says
    verify = sum(int(str(m["spec_verify_ct"])) for m in metas)
    assert w.accept_length_from == "Δgeneration_tokens/Δspec_verify_calls"
    assert w.accept_length == N * MAX_NEW / verify
    # two windows: the counts split between them, nothing lost or counted twice
    assert len(halves.windows) == 2
    assert sum(x.requests or 0 for x in halves.windows) == N
    assert sum(x.generation_tokens or 0 for x in halves.windows) == N * MAX_NEW


async def test_metrics_off_falls_back_to_the_decode_log_or_says_there_is_none() -> None:
    lines: asyncio.Queue[str] = asyncio.Queue()
    cfg = SimConfig(
        algorithm="dflash", decode_rate=400, accept_length=3.0, decode_log_interval=2, enable_metrics=False
    )

    async def follow() -> AsyncIterator[str]:
        while True:
            yield await lines.get()

    async with SimServer(cfg, log=lines.put_nowait) as s:
        origin = time.time()
        targets = [
            ScrapeTarget(ref="h/a", base_url=s.base_url, logs=follow),
            ScrapeTarget(ref="url", base_url=s.base_url),
        ]
        async with ServerScrape(targets, every_s=0.1) as sc:
            await _requests(s.base_url)
            await asyncio.sleep(0.2)  # the follower reads the last lines
        span = time.time() - origin
        logged, nothing = sc.result(origin, window_edges(span, span))
    assert logged.source == "decode-log" and logged.scrapes == 0 and logged.log_lines > 0
    assert logged.note is not None and "404" in logged.note and "--enable-metrics" in logged.note
    [w] = logged.windows
    assert w.source == "decode-log" and w.samples == logged.log_lines
    assert w.running_reqs_max is not None and w.running_reqs_max >= 1
    assert w.accept_length_from == "log" and w.accept_length is not None and 1.0 <= w.accept_length <= 16
    assert w.ttft_ms_p50 is None and w.requests is None  # the log has no histograms or counters
    assert nothing.source == "none" and nothing.windows == []
    assert nothing.note is not None and "no log to follow" in nothing.note


async def test_flush_cache_refused_while_a_request_runs_then_flushed() -> None:
    cfg = SimConfig(algorithm="dflash", decode_rate=50, accept_length=2.0, seed=2)
    async with SimServer(cfg, log=lambda s: None) as s:
        prompt = "a shared system prompt that is long enough to fill a cache page or two " * 4
        _, second = await _requests(s.base_url, 2, prompt)
        assert second["cached_tokens"] > 0  # the radix cache reused the first prompt's prefix
        async with httpc.AClient(base_url=s.base_url) as c:
            # ~3 s of decoding (300 tokens, 2 a step, 50 steps/s): both refused attempts land inside it even on
            # a busy machine (at 60 tokens, 0.6 s, a loaded CI run once saw the second attempt succeed)
            slow = asyncio.create_task(
                c.post("/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 300}})
            )
            while s.stats.running == 0:
                await asyncio.sleep(0.01)
            busy = await flush_cache("h/a", s.base_url, "level c=2", attempts=2, retry_s=0.05, wait_s=0)
            # 0.5.23's ?timeout=: the server waits for the running request to end, then flushes
            waited = await flush_cache("h/a", s.base_url, "level c=3", attempts=1, wait_s=30)
            assert s.stats.running == 0
            await slow
        done = await flush_cache("h/a", s.base_url, "level c=4")
        [third] = await _requests(s.base_url, 1, prompt)
    assert not busy.ok and busy.status == 400 and busy.attempts == 2 and busy.endpoint == "/flush_cache"
    assert busy.message == "Flush cache failed." and busy.before == "level c=2"
    assert waited.ok and waited.status == 200 and waited.attempts == 1
    assert done.ok and done.status == 200 and done.attempts == 1 and done.message.startswith("Cache flushed.")
    assert third["cached_tokens"] == 0  # the flush emptied the prefix cache


async def test_flush_cache_uses_vllm_endpoint_and_says_when_there_is_none() -> None:
    hits: list[str] = []

    async def reset(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="")

    for routes, want in (([("/reset_prefix_cache", reset)], True), ([], False)):
        app = web.Application()
        for path, h in routes:
            app.router.add_post(path, h)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            rec = await flush_cache("url", f"http://127.0.0.1:{port}", "run")
        finally:
            await runner.cleanup()
        assert rec.ok is want
        if want:
            assert (
                rec.endpoint == "/reset_prefix_cache"
                and rec.status == 200
                and hits == ["/reset_prefix_cache"]
            )
        else:
            assert rec.status == 404 and "neither /flush_cache nor /reset_prefix_cache" in rec.message

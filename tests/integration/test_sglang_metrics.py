"""SGLang's own /metrics read with prometheus_client's parser: from a real (simulated) SGLang server over
HTTP, and the multi-rank shape a real server prints."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from ddtree_tui.services.sglang_metrics import fetch_sglang_metrics, parse_sglang_metrics
from tests.collector.prom import wait_http
from tests.util import free_port

ROOT = Path(__file__).resolve().parents[2]

TWO_RANKS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="glm",tp_rank="0"} 3.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="glm",tp_rank="0"} 2.0
# HELP sglang:spec_accept_length The average acceptance length.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",engine_type="unified",model_name="glm",tp_rank="0"} 1.5
sglang:spec_accept_length{dp_rank="1",engine_type="unified",model_name="glm",tp_rank="0"} 2.5
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{dp_rank="0",engine_type="unified",model_name="glm",tp_rank="0"} 100.0
sglang:gen_throughput{dp_rank="1",engine_type="unified",model_name="glm",tp_rank="0"} 50.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",model_name="glm"} 12345.0
"""


def _start_sim(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "ddtree_tui.cli", "sim", "--algorithm", "dflash", "--port", str(port),
            "--load-time", "0", "--accept-length", "3.2", "--decode-log-interval", "2"]  # fmt: skip
    with open(tmp_path / "sim.log", "wb") as out:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=tmp_path,
        )


def test_ranks_are_summed_or_averaged() -> None:
    g = parse_sglang_metrics(TWO_RANKS)
    assert g is not None
    assert (g.running_reqs, g.accept_length, g.gen_throughput) == (5, 2.0, 150.0)
    assert g.token_usage is None
    idle = parse_sglang_metrics('sglang:spec_accept_length{tp_rank="0"} 0.0\n')
    assert idle is not None and idle.accept_length is None  # nothing decoded yet: no accept length, not 0
    assert parse_sglang_metrics("# nothing of SGLang's here\nup 1\n") is None


@pytest.mark.timeout(60)
@pytest.mark.slow
async def test_gauges_from_a_running_server(tmp_path: Path) -> None:
    port = free_port()
    proc = await asyncio.to_thread(_start_sim, tmp_path, port)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 30, "the simulated server", proc)
        async with aiohttp.ClientSession(trust_env=False) as c:
            async with c.post(
                f"http://127.0.0.1:{port}/generate",
                json={"text": "hello", "sampling_params": {"max_new_tokens": 64, "temperature": 0}},
                timeout=aiohttp.ClientTimeout(total=30),
            ) as r:
                assert r.status == 200
                await r.read()
            g = await fetch_sglang_metrics(c, f"http://127.0.0.1:{port}")
            assert g is not None and g.running_reqs == 0 and g.queue_reqs == 0
            assert g.accept_length is not None and 1.0 <= g.accept_length <= 16.0
            assert g.gen_throughput is not None and g.gen_throughput > 0
            assert await fetch_sglang_metrics(c, f"http://127.0.0.1:{free_port()}") is None  # nobody there
    finally:
        proc.terminate()
        proc.wait(10)

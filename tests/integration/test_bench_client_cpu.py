"""The measured client's cost and its stamps (issue 26, p-cpu2): a worker process starts on the stream client's
imports alone (no request or result model); every ready socket of a loop turn is stamped before any is parsed;
a request's send time is taken when its bytes are ready; load, soak and agentic runs record the client's CPU
as a plain run does (the same sentence in their JSON, their table and their HTML); the per-process share of the worker plan and
`--workers` both still decide how many processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_tui.bench import BenchRequest, BenchTarget
from ddtree_tui.bench import stream as stream_mod
from ddtree_tui.bench.agentic import run_agentic
from ddtree_tui.bench.evloop import loop_name, new_loop
from ddtree_tui.bench.load import LoadSpec, parse_load
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.soak import SoakSettings, run_soak
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.bench.tables import agentic_table, client_line, load_table, soak_table
from ddtree_tui.report.html import e
from ddtree_tui.report.loadhtml import render_agentic, render_load, render_soak
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer
from tests.util import sse_chunk, sse_socket_server


def _worker_imports(
    env: dict[str, str], argv: tuple[str, ...] = ("-m", "ddtree_tui.benchworker")
) -> set[str]:
    """The modules a real worker process imports from its start to its exit (its stdin pipe at EOF: no job)."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return {ln.rsplit("|", 1)[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}


def test_a_worker_process_imports_the_stream_client_and_no_request_or_result_model() -> None:
    mods = _worker_imports({})
    assert {"ddtree_tui.bench.stream", "ddtree_tui.bench.client", "ddtree_tui.bench.worker"} <= mods
    heavy = {"ddtree_tui.bench.models", "ddtree_tui.bench.prompts", "ddtree_tui.bench.metrics"}
    assert not heavy & mods, heavy & mods
    # the check sees the models where a process does import them
    assert "ddtree_tui.bench.models" in _worker_imports({}, ("-c", "import ddtree_tui.bench.models"))


async def _reads_then_parses(monkeypatch: pytest.MonkeyPatch, inline: bool) -> list[tuple[str, int]]:
    """n streams; one chunk written to every connection while the client's loop is not polling, so the loop
    finds them all ready in one turn: the order in which the client stamped and parsed those reads (the
    transport's reads: the tick, which stamps in the kernel, is off)."""
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, "0")
    if inline:
        monkeypatch.setenv(stream_mod.PARSE_ENV, "inline")
    else:
        monkeypatch.delenv(stream_mod.PARSE_ENV, raising=False)
    n = 6
    log: list[tuple[str, int]] = []
    real_recv, real_feed = stream_mod._Conn.data_received, stream_mod._Conn._feed

    def recv(self: stream_mod._Conn, data: bytes) -> None:
        if b"data: " in data:
            log.append(("stamp", id(self)))
        real_recv(self, data)

    def feed(self: stream_mod._Conn, data: bytes) -> None:
        if b"data: " in data:
            log.append(("parse", id(self)))
        real_feed(self, data)

    monkeypatch.setattr(stream_mod._Conn, "data_received", recv)
    monkeypatch.setattr(stream_mod._Conn, "_feed", feed)
    with sse_socket_server(n) as (port, conns):
        async with StreamClient() as client:
            url = f"http://127.0.0.1:{port}/v1/completions"
            resps = [await client.post(url, b"{}") for _ in range(n)]
            assert all(r.status == 200 for r in resps)
            for c in conns:  # all written before the loop polls again (loopback delivers inside send())
                c.sendall(sse_chunk(b'{"x": 1}'))
            got = [await anext(aiter(r.batches())) for r in resps]
            for c in conns:
                c.sendall(sse_chunk(b"[DONE]") + b"0\r\n\r\n")
            for r in resps:
                r.release(failed=True)
    assert [len(b) for b in got] == [1] * n
    # each line carries its own read's stamp, parsed or not
    assert all(b[0][1] == b'data: {"x": 1}' for b in got)
    return log[: 2 * n]


async def test_every_ready_socket_of_a_turn_is_stamped_before_any_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = await _reads_then_parses(monkeypatch, inline=False)
    kinds = [k for k, _ in log]
    assert kinds == ["stamp"] * 6 + ["parse"] * 6, kinds
    assert [c for _, c in log[:6]] == [c for _, c in log[6:]]  # parsed in the order they were read


def test_the_same_on_the_loop_a_measuring_process_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop (bench/evloop.py) also runs what a turn's I/O callbacks scheduled after all of them."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        if loop_name(runner.get_loop()) != "uvloop":
            pytest.skip("uvloop is not installed here")
        log = runner.run(_reads_then_parses(monkeypatch, inline=False))
    assert [k for k, _ in log] == ["stamp"] * 6 + ["parse"] * 6


async def test_inline_parsing_is_the_side_by_side_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = [k for k, _ in await _reads_then_parses(monkeypatch, inline=True)]
    assert kinds == ["stamp", "parse"] * 6, kinds


async def test_the_send_time_is_taken_when_the_request_bytes_are_ready() -> None:
    with sse_socket_server(1) as (port, conns):
        async with StreamClient() as client:
            t0 = time.monotonic()
            resp = await client.post(f"http://127.0.0.1:{port}/v1/completions", b"{}")
            t1 = time.monotonic()
            assert t0 <= resp.t_send <= t1  # taken inside post, before the write that the head answered
            conns[0].sendall(sse_chunk(b"[DONE]") + b"0\r\n\r\n")
            async for _ in resp.batches():
                pass
            resp.release()


def _target(url: str) -> BenchTarget:
    return BenchTarget(ref="h/sim", base_url=url, algorithm="baseline")


@pytest.mark.slow
async def test_a_load_run_records_its_client_cpu_in_the_json_the_table_and_the_html() -> None:
    cfg = SimConfig(algorithm="baseline", decode_rate=400)
    prompts = [Prompt(id=f"p{i}", text=f"q {i}") for i in range(2)]
    async with SimServer(cfg, log=lambda s: None) as sim:
        req = BenchRequest(prompts=prompts, warmup=1, concurrency=2, max_new_tokens=30, workers=2)
        load = await run_load(
            req,
            [_target(sim.base_url)],
            LoadSpec(kind="concurrency", levels=[1, 2]),
            LoadSettings(requests=2),
        )
    assert all(r.ok for r in load.results)
    c = load.client
    assert c is not None and c.workers == 2 and c.workers_reason == "--workers 2"
    tokens = sum(r.output_tokens or 0 for r in load.results if r.ok)
    assert c.cpu_s > 0 and c.wall_s > 0 and tokens > 0
    assert c.cpu_us_per_token == pytest.approx(c.cpu_s / tokens * 1e6)
    line = client_line(c)
    assert line is not None and "µs/token" in line
    assert json.loads(load.model_dump_json())["client"]["cpu_us_per_token"] == c.cpu_us_per_token
    assert line in load_table(load)
    assert e(line) in render_load(load)


def _plan_in_a_process(env: dict[str, str]) -> list[object]:
    code = (
        "import json; from ddtree_tui.bench.worker import plan_workers as p; "
        "print(json.dumps([p(0, 64, 250.0, cores=16), p(3, 64, 250.0, cores=16)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return list(json.loads(out.stdout))


def test_the_per_process_shares_are_their_variables_and_workers_overrides_them() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DDTREE_BENCH_CHUNKS_PER_WORKER", "DDTREE_BENCH_STREAMS_PER_WORKER")
    }
    why = "auto: 64 streams × 250 chunks/s = 16000 chunks/s planned, one process per {} chunks/s and per {} streams"
    default, asked = _plan_in_a_process(env)  # 16000 chunks/s: one share; 64 streams: four of 16
    assert default == [4, why.format(16000, 16)]
    assert asked == [3, "--workers 3"]
    two, asked2 = _plan_in_a_process({**env, "DDTREE_BENCH_STREAMS_PER_WORKER": "32"})
    assert two == [2, why.format(16000, 32)]
    assert asked2 == [3, "--workers 3"]
    eight, _ = _plan_in_a_process({**env, "DDTREE_BENCH_CHUNKS_PER_WORKER": "2000"})
    assert eight == [8, why.format(2000, 16)]


@pytest.mark.slow
async def test_a_soak_and_an_agentic_run_record_their_client_cpu_too(tmp_path: Path) -> None:
    cfg = SimConfig(algorithm="baseline", decode_rate=400)
    async with SimServer(cfg, log=lambda s: None) as sim:
        t = _target(sim.base_url)
        req = BenchRequest(prompts=[Prompt(id="p", text="q")], max_new_tokens=16, ignore_eos=True)
        soak = await run_soak(
            req,
            [t],
            parse_load("concurrency:2"),
            SoakSettings(duration_s=1.0, window_s=0.5, history_path=tmp_path / "h.jsonl"),
        )
        ag = await run_agentic(BenchRequest(max_new_tokens=12), [t], sessions=2, turns=2)
    for run, text in ((soak, soak_table(soak)), (ag, agentic_table(ag))):
        c = run.client
        assert c is not None and c.cpu_s > 0 and c.wall_s > 0 and c.cpu_us_per_token is not None
        line = client_line(c)
        assert line is not None and line in text
        assert json.loads(run.model_dump_json())["client"]["cpu_s"] == c.cpu_s
    assert e(client_line(soak.client) or "") in render_soak(soak)
    assert e(client_line(ag.client) or "") in render_agentic(ag)

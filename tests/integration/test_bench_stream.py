"""The bench's own transport and what the runner built on it (issue 14), against real servers on loopback:
chunks stamped at the socket read, kept-alive connections (and a dead one retried), prompts cycled to fill
the concurrency, worker processes, the client's self-check, the table and the headless progress."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddtree_tui.bench import BenchRequest, BenchTarget, report
from ddtree_tui.bench.client import measure_request, server_info
from ddtree_tui.bench.loadmon import verdict
from ddtree_tui.bench.models import BenchEvent, SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.runner import run_bench
from ddtree_tui.bench.stream import StreamClient, StreamError
from ddtree_tui.bench.worker import WORKER_MODULE, Worker, WorkerError
from ddtree_tui.sim.config import TIME_SCALE_ENV, SimConfig
from ddtree_tui.sim.server import SimServer
from tests.util import demo_profile


def _quiet(cfg: SimConfig) -> SimServer:
    return SimServer(cfg, log=lambda s: None)


def _target(url: str, cfg: SimConfig, ref: str = "h/sim") -> BenchTarget:
    return BenchTarget(ref=ref, base_url=url, algorithm=cfg.algorithm, mode=cfg.display_mode)


def _prompt(i: int = 0) -> Prompt:
    return Prompt(id=f"p{i}", messages=[{"role": "user", "content": f"question {i}"}])


async def test_lines_carry_the_read_time_not_the_time_they_were_parsed() -> None:
    cfg = SimConfig(algorithm="baseline", decode_rate=8)  # a chunk every 125 ms
    async with _quiet(cfg) as sim, StreamClient() as client:
        body = b'{"text": "q", "sampling_params": {"max_new_tokens": 4}, "stream": true}'
        async with await client.post(sim.base_url + "/generate", body) as resp:
            assert resp.status == 200
            stamped: list[tuple[float, float]] = []  # (read time, time this consumer saw it)
            async for batch in resp.batches():
                seen = time.monotonic()
                stamped += [(t, seen) for t, _ in batch]
                await asyncio.sleep(0.4)  # a slow consumer: later chunks arrive meanwhile
        assert len(stamped) >= 5  # 4 chunks and [DONE]
        # a chunk that came while the consumer was busy keeps the time of its read
        assert any(t < seen for t, seen in stamped[1:])
        assert [t for t, _ in stamped] == sorted(t for t, _ in stamped)


async def test_connections_are_kept_and_a_dead_one_is_retried() -> None:
    cfg = SimConfig(algorithm="dflash", decode_rate=2000, accept_length=3.0)
    async with _quiet(cfg) as sim, StreamClient() as client:
        t = _target(sim.base_url, cfg)
        sp = SamplingParams(max_new_tokens=12)
        a = await measure_request(client, t, _prompt(), sp)
        pool = next(iter(client._idle.values()))
        assert a.ok and a.output_tokens == 12 and len(pool) == 1
        first = pool[0]
        b = await measure_request(client, t, _prompt(), sp)
        assert b.ok and next(iter(client._idle.values())) == [first]  # the same connection, reused
        info = await server_info(client, sim.base_url)
        assert info is not None and info["simulated"] is True
        # the server closes a kept connection while it is idle: the next request retries on a fresh one
        assert first.transport is not None
        first.transport.close()
        await asyncio.sleep(0.05)
        c = await measure_request(client, t, _prompt(), sp)
        assert c.ok and c.output_tokens == 12


async def test_a_server_that_closes_after_each_response_is_measured_every_time() -> None:
    """A raw server that answers one request per connection and closes without saying so."""
    served = 0

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        nonlocal served
        await r.readuntil(b"\r\n\r\n")
        served += 1
        ev = b'data: {"text": "hi", "meta_info": {"completion_tokens": 1, "finish_reason": "stop"}}\n\n'
        ev += b"data: [DONE]\n\n"
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(ev))
        w.write(ev)
        await w.drain()
        w.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    target = BenchTarget(ref="h/raw", base_url=f"http://127.0.0.1:{port}", algorithm="baseline")
    async with srv, StreamClient() as client:
        for _ in range(3):
            r = await measure_request(client, target, _prompt(), SamplingParams(max_new_tokens=1))
            await asyncio.sleep(0.05)
            assert r.ok and r.output_tokens == 1, r.error
    assert served == 3


async def test_refused_connection_is_the_requests_error() -> None:
    async with StreamClient() as client:
        target = BenchTarget(ref="h/none", base_url="http://127.0.0.1:9", algorithm="baseline")
        r = await measure_request(client, target, _prompt(), SamplingParams(max_new_tokens=4))
        assert not r.ok and r.error is not None and r.error.startswith("connection: cannot connect")
        with pytest.raises(StreamError):
            await client.post("http://127.0.0.1:9/generate", b"{}")


async def test_fewer_prompts_than_concurrency_are_cycled_and_all_in_flight() -> None:
    cfg = SimConfig(algorithm="dflash", decode_rate=200, accept_length=3.0)
    events: list[BenchEvent] = []
    async with _quiet(cfg) as sim:
        req = BenchRequest(prompts=[_prompt(0), _prompt(1)], warmup=0, concurrency=5, max_new_tokens=9)
        run = await run_bench(req, [_target(sim.base_url, cfg)], on_event=events.append)
    assert run.prompts_cycled and run.requests_per_batch == 5 and len(run.results) == 5
    assert [r.prompt_id for r in run.results] == ["p0", "p1", "p0", "p1", "p0"]
    kinds = [e.kind for e in events]
    assert kinds.index("prompt_finished") > max(i for i, k in enumerate(kinds) if k == "prompt_started")
    assert kinds.count("prompt_started") == 5
    s = run.summary[0]
    assert s.output_tokens == 45 and s.output_throughput and s.request_throughput
    assert run.client is not None and run.client.workers == 1 and run.client.cpu_s > 0
    text = report.table(run)
    assert (
        "2 prompt(s) cycled to keep 5 requests in flight" in text and "out tok/s" in text and "req/s" in text
    )


async def test_worker_processes_measure_the_same_as_one_loop() -> None:
    cfg = SimConfig(algorithm="dflash", decode_rate=400, accept_length=3.0, seed=3)
    async with _quiet(cfg) as sim:
        t = _target(sim.base_url, cfg)
        prompts = [_prompt(i) for i in range(4)]
        one = await run_bench(BenchRequest(prompts=prompts, warmup=1, concurrency=4, max_new_tokens=15), [t])
        events: list[BenchEvent] = []
        two = await run_bench(
            BenchRequest(
                prompts=prompts,
                warmup=1,
                concurrency=4,
                max_new_tokens=15,
                workers=2,
                tokens_event_interval=0,
            ),
            [t],
            on_event=events.append,
        )
    assert two.failed == 0 and len(two.results) == 4
    assert two.client is not None and two.client.workers == 2
    by = {r.prompt_id: r for r in one.results}
    for r in two.results:  # the server's counts, whichever process read them
        assert r.output_tokens == by[r.prompt_id].output_tokens == 15
        assert r.accept_length == by[r.prompt_id].accept_length
    assert any(e.kind == "tokens_received" for e in events)  # progress comes back from the workers
    assert two.summary[0].output_throughput is not None
    assert "2 client workers" in report.table(two)


async def test_a_dead_worker_is_an_error_not_a_hang() -> None:
    w = Worker(7)
    await w.start()
    assert w.proc is not None
    w.proc.kill()
    await w.proc.wait()
    target = BenchTarget(ref="h/x", base_url="http://127.0.0.1:9", algorithm="baseline")
    with pytest.raises(WorkerError, match="client worker 7 exited"):
        async with asyncio.timeout(10):
            await w.measure(
                target,
                _prompt(),
                SamplingParams(),
                seq=0,
                repeat=0,
                warmup=False,
                timeout=5,
                on_tokens=None,
                tokens_interval=0.1,
            )
    await w.close()


def test_client_bound_verdict_names_the_reason() -> None:
    busy = verdict(
        [{"cpu_s": 0.95, "wall_s": 1.0, "lag_p50": 1.0, "lag_p99": 2.0, "lag_max": 3.0}], 1000, 1.0
    )
    assert busy.client_bound and busy.reason is not None and "95 % of a core" in busy.reason
    assert busy.cpu_us_per_token == pytest.approx(950.0)
    lag = verdict([{"cpu_s": 0.1, "wall_s": 1.0, "lag_p50": 3.0, "lag_p99": 40.0, "lag_max": 50.0}], 10, 1.0)
    assert lag.client_bound and lag.reason is not None and "lag p99 40.0 ms" in lag.reason
    # several processes: the busiest decides, CPU adds up
    ok = verdict(
        [
            {"cpu_s": 0.2, "wall_s": 1.0, "lag_p50": 0.5, "lag_p99": 1.0, "lag_max": 2.0},
            {"cpu_s": 0.3, "wall_s": 1.0, "lag_p50": 0.6, "lag_p99": 1.5, "lag_max": 2.0},
        ],
        100,
        1.0,
        workers=2,
    )
    assert not ok.client_bound and ok.reason is None and ok.workers == 2
    assert ok.cpu_s == pytest.approx(0.5) and ok.cpu_core_max == pytest.approx(0.3)


async def test_client_bound_run_says_so_in_table_and_json() -> None:
    cfg = SimConfig(algorithm="baseline", decode_rate=2000)
    async with _quiet(cfg) as sim:
        run = await run_bench(
            BenchRequest(prompts=[_prompt()], warmup=0, max_new_tokens=4), [_target(sim.base_url, cfg)]
        )
    assert run.client is not None and not run.client_bound
    bound = run.model_copy(
        update={
            "client_bound": True,
            "client": run.client.model_copy(
                update={"client_bound": True, "reason": "client CPU at 97 % of a core"}
            ),
        }
    )
    text = report.table(bound)
    assert "CLIENT-BOUND: client CPU at 97 % of a core" in text and "--workers" in text
    back = report.from_json(report.to_json(bound))
    assert (
        back.client_bound and back.client is not None and back.client.reason == "client CPU at 97 % of a core"
    )


@pytest.mark.slow
def test_headless_progress_starts_at_once_and_workers_are_validated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the demo's sims fast-forwarded: what is checked is not their pace
    monkeypatch.setenv(TIME_SCALE_ENV, "10")
    argv = [sys.executable, "-m", "ddtree_tui.cli", "--run-bench", "--demo", "--max-new-tokens", "6"]
    argv += ["--profile", str(demo_profile(tmp_path))]  # on free ports: other tests run demos meanwhile
    argv += ["--concurrency", "4", "--workers", "2", "--warmup", "0", "--history", str(tmp_path / "h.jsonl")]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    first = p.stderr.splitlines()[0]
    assert first.startswith("ddtree-tui --run-bench: preparing 2 service(s): starting simulated local/dflash")
    assert "concurrency 4 (3 prompts cycled to keep 4 in flight), 2 client worker processes" in p.stderr
    assert "out tok/s" in p.stdout and "client: 2 process(es)" in p.stdout
    bad = subprocess.run([*argv[:-2], "--workers", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--workers must be at least 1" in bad.stderr


async def test_a_stopped_run_with_workers_ends_them_and_keeps_what_was_measured() -> None:
    cfg = SimConfig(algorithm="baseline", decode_rate=20)
    async with _quiet(cfg) as sim:
        stop = asyncio.Event()
        req = BenchRequest(
            prompts=[_prompt()], warmup=0, repeats=5, concurrency=2, max_new_tokens=10, workers=2
        )

        def first_result_stops(ev: BenchEvent) -> None:  # not a 1 s timer: workers start late when busy
            if ev.kind == "prompt_finished":
                stop.set()

        run = await run_bench(req, [_target(sim.base_url, cfg)], on_event=first_result_stops, stop=stop)
    assert run.status == "interrupted" and 0 < len(run.results) < 10
    assert run.client is not None and run.client.workers == 2
    workers = [
        p for p in psutil.Process(os.getpid()).children(recursive=True) if WORKER_MODULE in p.cmdline()
    ]
    assert workers == []

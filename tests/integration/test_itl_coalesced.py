"""ITL that coalesced reads cannot zero out (issue 29). Chunks that arrive in one socket read share its
timestamp; a loaded client (`--concurrency 64` at 1000 tok/s) reads several at once and its median ITL read
0.000 ms. Here a server in the style of benchmarks/exact_server.py sends one token a chunk on an exact
schedule, but BURST chunks in one write, so every read holds several chunks whatever the machine's load;
its own record of when each write left is the truth the client is compared with."""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson

from ddtree_tui.bench import BenchRequest, BenchTarget, report, tables
from ddtree_tui.bench.client import measure_request
from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.metrics import Timeline, timeline_metrics
from ddtree_tui.bench.models import SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.runner import RunHooks, run_bench
from ddtree_tui.bench.stream import StreamClient

RATE = 1000.0  # tokens per second per request, one token a chunk
BURST = 8  # chunks in one write: one read on the client (a loopback write of a few KiB is one segment)
TOKENS = 96


def _frame(payload: bytes) -> bytes:
    ev = b"data: " + payload + b"\n\n"
    return f"{len(ev):x}\r\n".encode() + ev + b"\r\n"


@dataclass
class BurstServer:
    """/generate at RATE, BURST one-token chunks a write, each write due at an absolute time."""

    writes: list[list[float]] = field(default_factory=list)  # per request: monotonic time of each write
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # (CancelledError: the loop ends while the handler waits for a next request)
        with contextlib.suppress(
            ConnectionError, asyncio.IncompleteReadError, OSError, asyncio.CancelledError
        ):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for h in head.split(b"\r\n")[1:]:
                    if h.lower().startswith(b"content-length:"):
                        length = int(h.split(b":", 1)[1])
                body = json.loads(await reader.readexactly(length))
                n = int(body["sampling_params"]["max_new_tokens"])
                record: list[float] = []
                self.writes.append(record)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                t0 = time.monotonic() + 0.01
                text = ""
                for lo in range(0, n, BURST):
                    out = b""
                    for i in range(lo, min(n, lo + BURST)):
                        text += f"w{i} "
                        meta: dict[str, object] = {"completion_tokens": i + 1, "finish_reason": None}
                        if i == n - 1:
                            meta["finish_reason"] = {"type": "length"}
                        out += _frame(orjson.dumps({"text": text, "meta_info": meta}))
                    if lo + BURST >= n:
                        out += _frame(b"[DONE]") + b"0\r\n\r\n"
                    # write k is due at t0 + k × BURST / RATE: a late one never shifts the ones after it
                    await asyncio.sleep(max(0.0, t0 + lo / RATE - time.monotonic()))
                    writer.write(out)
                    record.append(time.monotonic())
                    await writer.drain()

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[BurstServer]:
        srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = srv.sockets[0].getsockname()[1]
        async with srv:
            yield self


def _target(port: int) -> BenchTarget:
    return BenchTarget(ref="h/burst", base_url=f"http://127.0.0.1:{port}", algorithm="baseline")


async def test_chunks_of_one_read_share_its_gap_and_the_median_is_not_zero() -> None:
    async with BurstServer().serve() as srv, StreamClient() as client:
        r = await measure_request(
            client, _target(srv.port), Prompt(id="p", text="q"), SamplingParams(max_new_tokens=TOKENS)
        )
    assert r.ok and r.output_tokens == TOKENS, r.error
    record = srv.writes[0]
    # against the server's record: it made len(record) writes of BURST chunks; a read holds whole writes
    # (a loopback write of a few hundred bytes arrives in one piece), so every read held several chunks
    assert 1 <= r.reads <= len(record) and r.coalesced_reads == r.reads
    # before, 7 of every 8 samples were 0 ms and so was the median; now no sample is 0
    assert r.itl_quantiles_ms is not None and r.itl_quantiles_ms[0] > 0 and r.itl_p50_ms is not None
    # and the samples still add up to the measured decode time (first read → last read: e2e − TTFT; the
    # [DONE] came in the last write), over the tokens after the first read (a whole number of writes)
    assert r.itl_mean_ms is not None and r.e2e_s is not None and r.ttft_s is not None
    span_ms = (r.e2e_s - r.ttft_s) * 1000.0
    assert any(abs(r.itl_mean_ms * (TOKENS - m * BURST) - span_ms) < 1e-6 for m in range(1, len(record))), (
        r.itl_mean_ms,
        span_ms,
    )


async def test_the_table_and_json_say_how_many_reads_held_several_chunks() -> None:
    async with BurstServer().serve() as srv:
        req = BenchRequest(
            prompts=[Prompt(id="p", text="q")], warmup=0, repeats=2, concurrency=2, max_new_tokens=TOKENS
        )
        run = await run_bench(req, [_target(srv.port)])
    s = run.summary[0]
    assert s.n >= 2 and s.failed == 0 and s.reads >= s.n and s.coalesced_reads == s.reads
    assert sum(r.coalesced_reads for r in run.results) == s.coalesced_reads
    doc = json.loads(report.to_json(run))
    assert doc["summary"][0]["coalesced_reads"] == s.coalesced_reads
    assert doc["results"][0]["reads"] >= 1
    text = report.table(run)
    assert f"reads with several chunks: h/burst {s.coalesced_reads}/{s.reads} (100 %)" in text, text


async def test_a_load_runs_table_says_it_too() -> None:
    async with BurstServer().serve() as srv:
        req = BenchRequest(prompts=[Prompt(id="p", text="q")], warmup=0, max_new_tokens=TOKENS)
        run = await run_load(
            req, [_target(srv.port)], parse_load("concurrency:2"), LoadSettings(requests=2), RunHooks()
        )
    ok = [r for r in run.results if r.ok and not r.warmup]
    assert ok and all(r.coalesced_reads == r.reads > 0 for r in ok)
    reads, coalesced = sum(r.reads for r in ok), sum(r.coalesced_reads for r in ok)
    assert f"reads with several chunks: h/burst {coalesced}/{reads} (100 %)" in tables.load_table(run)


def test_a_reads_gap_is_spread_over_all_its_tokens() -> None:
    """The definition on exact numbers: reads at 0, 10, 20 and 21 ms after the first; the second read holds
    4 one-token chunks, the third 2 chunks of 2 tokens, the fourth one chunk of 1 token."""
    tl = Timeline(t_send=0.0)
    tl.add(1.000, 1, True)  # first read: TTFT, not an ITL sample
    for _ in range(4):
        tl.add(1.010, 1, True)
    for _ in range(2):
        tl.add(1.020, 2, True)
    tl.add(1.021, 1, True)
    m = timeline_metrics(tl, 1 + 4 + 4 + 1)
    assert m["reads"] == 4 and m["coalesced_reads"] == 2
    samples = [2.5] * 4 + [2.5] * 4 + [1.0]  # 10 ms / 4 tokens, 10 ms / 4 tokens, 1 ms / 1 token
    assert abs(m["itl_p50_ms"] - statistics.median(samples)) < 1e-9
    assert abs(m["itl_mean_ms"] - statistics.fmean(samples)) < 1e-9  # = 21 ms / 9 tokens: nothing lost
    # one chunk a read is unchanged: each gap over its chunk's tokens
    tl = Timeline(t_send=0.0)
    for i, k in enumerate((1, 2, 4)):
        tl.add(1.0 + i * 0.008, k, True)
    m = timeline_metrics(tl, 7)
    assert m["coalesced_reads"] == 0 and m["reads"] == 3
    assert abs(m["itl_p50_ms"] - 2.0) < 1e-9 and abs(m["itl_mean_ms"] - 16.0 / 6) < 1e-9  # [4, 4, 2, 2, 2, 2]

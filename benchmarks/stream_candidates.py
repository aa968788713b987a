"""Which streaming hot path for the bench client: CPU per chunk and TTFT error of candidate transports.

Against benchmarks/exact_server.py (a child process, exact rate, reports its true send times), each candidate
streams C concurrent SGLang /generate requests and does the minimum a benchmark must do per chunk: stamp it,
parse its JSON, read `meta_info.completion_tokens`. Candidates, interleaved round by round so machine load
hits all alike:

  aiohttp+orjson   aiohttp.ClientSession, `async for line in resp.content` + orjson (SGLang's bench_serving)
  raw+json         bench/stream.py (asyncio.Protocol + httptools, stamp at the socket read) + json.loads
  raw+orjson       bench/stream.py + orjson.loads                 (the chosen one)
  raw+msgspec      bench/stream.py + msgspec.json.decode

(httpx+json, the client before issue 14, was a candidate until issue 24 dropped httpx from the project.)

Each candidate first warms its connections with C short requests (as the runner's warm-up does). Columns: client CPU µs per chunk and per token (process_time over the streaming phase), median TTFT error
against the server's own first-send time, and the median per-request e2e error against the server's.

Run: python benchmarks/stream_candidates.py [--concurrency 64] [--rate 1000] [--tokens-per-chunk 4]
     [--tokens 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import orjson

from ddtree_tui.bench.stream import StreamClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exact_server import Config, ExactServer

HERE = Path(__file__).resolve().parent
Result = tuple[float, float, int]  # (ttft from send, e2e from send, chunks)
CPU: list[float] = []


def _body(n: int) -> dict:
    return {"text": "hello", "sampling_params": {"max_new_tokens": n}, "stream": True}


async def _phase(one: Callable[..., Awaitable[Result]], c: int, reset: Callable[[], None]) -> list[Result]:
    """c short requests to warm the connections (as the runner's warm-up does), then the c measured ones;
    the client CPU of the measured phase goes to CPU."""
    await asyncio.gather(*(one(8) for _ in range(c)))
    reset()
    cpu0 = time.process_time()
    res = await asyncio.gather(*(one() for _ in range(c)))
    CPU.append(time.process_time() - cpu0)
    return list(res)


async def _score(
    lines: AsyncIterator[Any],
    t0: float,
    loads: Callable[[Any], dict],
    data: Any,
    done: Any,
    strip: bool = False,
) -> Result:
    """The per-chunk minimum over a client's lines (str or bytes): stamp, parse, read completion_tokens.
    `strip`: the client yields lines with their newline (aiohttp)."""
    first = 0.0
    k = 0
    async for line in lines:
        if strip:
            line = line.strip()
        if not line.startswith(data):
            continue
        now = time.monotonic()
        if (p := line[5:].strip()) == done:
            return first - t0, now - t0, k
        obj = loads(p)
        obj["meta_info"]["completion_tokens"]
        k += 1
        first = first or now
    return first - t0, time.monotonic() - t0, k


async def c_aiohttp(
    url: str, c: int, n: int, loads: Callable[[bytes], dict], reset: Callable[[], None]
) -> list[Result]:
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, read_bufsize=10 * 1024**2) as s:

        async def one(n: int = n) -> Result:
            t0 = time.monotonic()
            async with s.post(url, json=_body(n)) as r:
                return await _score(r.content, t0, loads, b"data:", b"[DONE]", strip=True)

        return await _phase(one, c, reset)


async def c_raw(
    url: str, c: int, n: int, loads: Callable[[bytes], dict], reset: Callable[[], None]
) -> list[Result]:
    async with StreamClient() as cl:
        body = orjson.dumps(_body(n))

        async def one(n: int = n) -> Result:
            t0 = time.monotonic()
            first = 0.0
            k = 0
            async with await cl.post(url, body) as r:
                async for batch in r.batches():
                    for now, line in batch:
                        if not line.startswith(b"data:"):
                            continue
                        p = line[5:].strip()
                        if p == b"[DONE]":
                            return first - t0, now - t0, k
                        obj = loads(p)
                        obj["meta_info"]["completion_tokens"]
                        k += 1
                        first = first or now
            return first - t0, time.monotonic() - t0, k

        return await _phase(one, c, reset)


CANDIDATES: dict[str, tuple[Callable[..., Awaitable[list[Result]]], Callable[[bytes], dict]]] = {
    "aiohttp+orjson": (c_aiohttp, orjson.loads),
    "raw+json": (c_raw, json.loads),
    "raw+orjson": (c_raw, orjson.loads),
    "raw+msgspec": (c_raw, msgspec.json.decode),
}


async def measure(
    a: argparse.Namespace, srv: ExactServer
) -> dict[str, list[tuple[float, float, float, float]]]:
    base = srv.base_url
    rows: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in CANDIDATES}
    for rnd in range(a.rounds):
        for name, (fn, loads) in CANDIDATES.items():
            res = await fn(base + "/generate", a.concurrency, a.tokens, loads, srv.reset)
            cpu = CPU[-1]
            st = srv.get("/stats")
            true_ttft = statistics.median(d["t_first"] - d["t_arrival"] for d in st["done"])
            true_e2e = statistics.median(d["t_last"] - d["t_arrival"] for d in st["done"])
            chunks = sum(r[2] for r in res) + len(res)
            ttft_err = (statistics.median(r[0] for r in res) - true_ttft) * 1000
            e2e_err = (statistics.median(r[1] for r in res) - true_e2e) / true_e2e * 100
            rows[name].append((cpu / chunks * 1e6, cpu / (a.tokens * a.concurrency) * 1e6, ttft_err, e2e_err))
            print(f"round {rnd + 1} {name}: {rows[name][-1]}", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--tokens-per-chunk", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    srv = ExactServer(Config(a.rate, a.tokens_per_chunk))
    with srv:
        rows = asyncio.run(measure(a, srv))
    print(
        f"c={a.concurrency}, {a.rate:g} tok/s per request, {a.tokens_per_chunk} tokens/chunk, {a.tokens} tokens, "
        f"median of {a.rounds} rounds"
    )
    print(f"{'candidate':<16}{'CPU µs/chunk':>14}{'CPU µs/token':>14}{'TTFT err ms':>13}{'e2e err %':>11}")
    for name, rs in rows.items():
        m = [statistics.median(x[i] for x in rs) for i in range(4)]
        print(f"{name:<16}{m[0]:>14.1f}{m[1]:>14.1f}{m[2]:>13.2f}{m[3]:>+11.2f}")


if __name__ == "__main__":
    main()

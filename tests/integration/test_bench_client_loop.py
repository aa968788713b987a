"""The measured client's loop and connections (issue 26, CPU per token): every measuring process runs on
uvloop where it is installed and on asyncio's loop when DDTREE_BENCH_LOOP=asyncio (bench/evloop.py), and the
pools are filled before the clock starts (StreamClient.preconnect, Worker.preconnect), against a real server on
loopback that counts the connections it accepts."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator

import pytest

from ddtree_tui.bench.evloop import LOOP_ENV, loop_name, new_loop
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.bench.worker import PER_WORKER_CHUNKS_S, PLAN_SLACK, Worker, plan_workers

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None
SSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
)


class _Counting:
    """A loopback HTTP server that answers every request with an SSE stream of [DONE] and counts the
    connections it accepted."""

    def __init__(self) -> None:
        self.accepted = 0
        self.server: asyncio.Server | None = None

    async def _conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while await r.readuntil(b"\r\n\r\n"):
                w.write(SSE)
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"


@pytest.fixture
async def counting() -> AsyncIterator[_Counting]:
    c = _Counting()
    c.server = await asyncio.start_server(c._conn, "127.0.0.1", 0)
    try:
        yield c
    finally:
        c.server.close()
        await c.server.wait_closed()


@pytest.mark.parametrize("env", [None, "asyncio"])
def test_the_measuring_loop_is_uvloop_where_installed_unless_asked_for_asyncio(
    env: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(LOOP_ENV, env)
    loop = new_loop()
    try:
        want = "uvloop" if HAS_UVLOOP and env is None else "asyncio"
        assert loop_name(loop) == want
        assert isinstance(loop, asyncio.AbstractEventLoop)
    finally:
        loop.close()


async def test_preconnect_fills_the_pool_and_a_request_takes_a_connection_from_it(
    counting: _Counting,
) -> None:
    async with StreamClient() as client:
        assert await client.preconnect(counting.url, 5) == 5
        for _ in range(50):  # the server counts an accept when its handler runs
            if counting.accepted == 5:
                break
            await asyncio.sleep(0.01)
        assert counting.accepted == 5 and client.idle_count(counting.url) == 5
        assert await client.preconnect(counting.url, 3) == 5  # enough idle already: none opened
        async with await client.post(counting.url + "/v1/completions", b"{}") as resp:
            status = resp.status
            lines = [line async for batch in resp.batches() for _, line in batch]
        assert status == 200 and lines == [b"data: [DONE]"]
        await asyncio.sleep(0.05)
        assert counting.accepted == 5  # the request went on a preconnected connection


async def test_preconnect_to_a_closed_port_raises_and_keeps_nothing() -> None:
    async with StreamClient() as client:
        with pytest.raises(Exception, match="cannot connect"):
            await client.preconnect("http://127.0.0.1:9", 2)
        assert client.idle_count("http://127.0.0.1:9") == 0


@pytest.mark.parametrize("env", [None, "asyncio"])
async def test_a_worker_process_fills_its_pool_and_says_which_loop_it_runs(
    env: str | None, counting: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(LOOP_ENV, env)  # the worker process inherits it
    w = Worker(0)
    try:
        await w.start()
        held, loop = await w.preconnect(counting.url, 4)
        assert held == 4 and loop == ("uvloop" if HAS_UVLOOP and env is None else "asyncio")
        held, _ = await w.preconnect("http://127.0.0.1:9", 2)  # nothing listens: no error, none held
        assert held == 0
    finally:
        await w.close()
    assert w.proc is not None and w.proc.returncode is not None


def test_a_planned_rate_a_hair_over_a_share_gets_no_second_process() -> None:
    """The warm-up's chunk rate is measured: 16 streams × 250.06 chunks/s must not start a second process
    because 4001 > 4000 (it did: c=16 × 1000 tok/s × 4 tok/chunk in benchmarks/peers.py)."""
    share = PER_WORKER_CHUNKS_S / 16
    assert plan_workers(0, 16, share * 1.0002, cores=16)[0] == 1
    assert plan_workers(0, 16, share * (1 + PLAN_SLACK / 2), cores=16)[0] == 1
    assert plan_workers(0, 16, share * 1.2, cores=16)[0] == 2  # well over: a second process
    assert plan_workers(0, 16, share * 3.0, cores=16)[0] == 3

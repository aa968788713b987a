"""Flowing streams read on a tick, each read stamped by the kernel (issue 26; bench/stream.py _Ticker).

A plain-socket server on loopback writes each SSE chunk from the test's own coroutine, so the kernel stamps
it inside that `sendall`, between two monotonic readings the test takes around it; the test then blocks its
event loop, so no read can happen until later. A line read with the kernel's stamp carries a time inside
the send's bracket, before the loop was free again; one stamped when the read returned (`--read-tick-ms 0`)
carries a time after it. Both loops a run uses (asyncio's and uvloop) are checked; a lone stream's reads
(each taken at once: below TICK_MIN_STREAMS) and the ticked reads of several streams alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from ddtree_tui.bench import stream as stream_mod
from ddtree_tui.bench.evloop import new_loop
from ddtree_tui.bench.stream import Line, StreamClient
from tests.util import sse_chunk, sse_socket_server

pytestmark = pytest.mark.skipif(not stream_mod._kernel_stamps(), reason="kernel receive stamps are Linux's")

CHUNKS = 5  # the first EAGER_READS are read at once, the rest on the tick
BLOCK_S = 0.05  # the loop is held this long after each write: no read can happen before it is free


@pytest.fixture
def kernel_stamping() -> Iterator[None]:
    """Receive stamps on for the whole host before the test's first segment: Linux turns them on through
    deferred work the first time a socket asks (stream._stamp_reads), which a busy host runs late, and a
    segment that comes before it carries no stamp. A stamping loopback pair is held open for the test and
    probed until a segment of its own comes stamped."""
    ls = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(ls.getsockname())
    b, _ = ls.accept()
    try:
        b.settimeout(10)
        b.setsockopt(socket.SOL_SOCKET, stream_mod._SO_TIMESTAMPNS, 1)
        deadline = time.monotonic() + 10
        while True:
            a.sendall(b"x")
            _, anc, _, _ = b.recvmsg(16, stream_mod._CMSG_TS)
            if anc:
                break
            assert time.monotonic() < deadline, "the kernel stamped no segment in 10 s"
            time.sleep(0.001)
        yield
    finally:
        for s in (a, b, ls):
            s.close()


async def _stamps_of_late_reads() -> list[tuple[float, float, float, Line]]:
    """(before the write, after it, when the loop was free again, the line as read) for each chunk."""
    out: list[tuple[float, float, float, Line]] = []
    with sse_socket_server(1) as (port, conns):
        async with StreamClient() as client:
            resp = await client.post(f"http://127.0.0.1:{port}/v1/completions", b"{}")
            assert resp.status == 200
            c = conns[0]
            lines = aiter(resp.batches())
            pending: list[Line] = []
            for k in range(CHUNKS):
                t0 = time.monotonic()
                c.sendall(sse_chunk(b'{"k": %d}' % k))
                t1 = time.monotonic()
                time.sleep(BLOCK_S)  # noqa: ASYNC251 (on purpose: the loop is held, the chunk waits in the socket)
                t_free = time.monotonic()
                while not pending:
                    pending = list(await asyncio.wait_for(anext(lines), 10))
                line = pending.pop(0)
                assert line[1] == b'data: {"k": %d}' % k
                out.append((t0, t1, t_free, line))
            c.sendall(sse_chunk(b"[DONE]") + b"0\r\n\r\n")
            async for _ in lines:
                pass
    return out


def _run(
    loop_kind: str, tick_ms: str, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[float, float, float, Line]]:
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, tick_ms)
    factory = new_loop if loop_kind == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_stamps_of_late_reads())


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
@pytest.mark.usefixtures("kernel_stamping")
def test_a_read_the_loop_got_to_late_carries_the_kernels_arrival_time(
    loop_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = _run(loop_kind, "5", monkeypatch)
    assert len(got) == CHUNKS
    for k, (t0, t1, t_free, (stamp, _)) in enumerate(got):
        # stamped inside the write's bracket (a clock conversion's slack either side), long before the loop
        # could read it: the kernel's time of arrival, not the read's
        assert t0 - 0.005 <= stamp <= t1 + 0.005, (k, t0, stamp, t1)
        assert stamp < t_free, (k, stamp, t_free)


async def _many_streams_late(n: int) -> list[list[tuple[float, float, float, Line]]]:
    """n streams at once, each written a chunk at a time while the loop is held, then read: per stream, as
    `_stamps_of_late_reads`."""
    out: list[list[tuple[float, float, float, Line]]] = [[] for _ in range(n)]
    with sse_socket_server(n) as (port, conns):
        async with StreamClient() as client:
            url = f"http://127.0.0.1:{port}/v1/completions"
            resps = [await client.post(url, b"{}") for _ in range(n)]
            assert all(r.status == 200 for r in resps)
            assert len(conns) == n  # each listed before its head, which post() waited for
            its = [aiter(r.batches()) for r in resps]
            pending: list[list[Line]] = [[] for _ in range(n)]
            for k in range(CHUNKS):
                marks = []
                for c in conns:
                    t0 = time.monotonic()
                    c.sendall(sse_chunk(b'{"k": %d}' % k))
                    marks.append((t0, time.monotonic()))
                time.sleep(BLOCK_S)  # noqa: ASYNC251 (on purpose: the loop is held)
                t_free = time.monotonic()
                for i in range(n):
                    while not pending[i]:
                        pending[i] = list(await asyncio.wait_for(anext(its[i]), 10))
                    line = pending[i].pop(0)
                    assert line[1] == b'data: {"k": %d}' % k
                    out[i].append((min(m[0] for m in marks), max(m[1] for m in marks), t_free, line))
            for c in conns:
                c.sendall(sse_chunk(b"[DONE]") + b"0\r\n\r\n")
            for it in its:
                async for _ in it:
                    pass
    return out


@pytest.mark.usefixtures("kernel_stamping")
def test_a_tick_read_in_slices_stamps_every_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven streams (past TICK_MIN_STREAMS: they join the tick after their first token), a tick reads two a
    callback (the loop polls between slices): every line of every stream still carries its kernel stamp,
    inside the writes' bracket."""
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, "5")
    monkeypatch.setattr(stream_mod, "TICK_SLICE", 2)
    slices: list[int] = []
    real_slice = stream_mod._Ticker._slice

    def counted(self: stream_mod._Ticker, off: float) -> None:
        slices.append(min(len(self.todo), 2))
        real_slice(self, off)

    monkeypatch.setattr(stream_mod._Ticker, "_slice", counted)
    with asyncio.Runner(loop_factory=new_loop) as runner:
        got = runner.run(_many_streams_late(7))
    assert slices and max(slices) == 2  # the tick read them, in slices of two
    for i, stream in enumerate(got):
        assert len(stream) == CHUNKS
        for k, (t0, t1, t_free, (stamp, _)) in enumerate(stream):
            assert t0 - 0.005 <= stamp <= t1 + 0.005, (i, k, t0, stamp, t1)
            assert stamp < t_free, (i, k)


async def _readers_waiting(n: int, chunks: int, woken: list[list[float]] | None = None) -> list[list[Line]]:
    """n streams whose readers wait for lines (each in its own task) while the server writes a chunk to every
    stream each 10 ms, the loop free in between: per stream, the lines as its reader got them (and in
    `woken`, when it got each batch)."""
    got: list[list[Line]] = [[] for _ in range(n)]
    woken = woken if woken is not None else [[] for _ in range(n)]
    with sse_socket_server(n) as (port, conns):
        async with StreamClient() as client:
            url = f"http://127.0.0.1:{port}/v1/completions"
            resps = [await client.post(url, b"{}") for _ in range(n)]
            assert len(conns) == n  # each listed before its head, which post() waited for

            async def read(i: int) -> None:
                async for batch in resps[i].batches():
                    got[i].extend(batch)
                    woken[i].append(time.monotonic())

            readers = [asyncio.create_task(read(i)) for i in range(n)]
            for k in range(chunks):
                for c in conns:
                    c.sendall(sse_chunk(b'{"k": %d}' % k))
                await asyncio.sleep(0.01)
            for c in conns:
                c.sendall(sse_chunk(b"[DONE]") + b"0\r\n\r\n")
            await asyncio.wait_for(asyncio.gather(*readers), 10)
    return got


@pytest.mark.parametrize("tick_ms", ["5", "0"])
def test_a_flowing_streams_reader_is_woken_at_most_every_coalescing_interval(
    tick_ms: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines that arrive every 10 ms reach the reader in batches at most every COALESCE_S (each batch is a step
    of the request's task), however the stream is read; the stream's end wakes it at once."""
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, tick_ms)
    woken: list[list[float]] = [[] for _ in range(5)]
    chunks = 30
    with asyncio.Runner(loop_factory=new_loop) as runner:
        got = runner.run(_readers_waiting(5, chunks, woken))
    for i, (lines, times) in enumerate(zip(got, woken, strict=True)):
        assert len(lines) == chunks + 1, i
        span = times[-1] - lines[0][0]  # from the first line's arrival to the last batch
        # a wake per chunk would be 31 batches; coalesced, one per interval begun, and the end's own
        assert len(times) <= span / stream_mod.COALESCE_S + 2, (i, len(times), span)


@pytest.mark.parametrize("tick_ms", ["5", "0"])
def test_the_head_wakes_its_waiter_at_once_not_after_the_coalescing_interval(
    tick_ms: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`post` returns as soon as the response's head is in: the coalescing of a stream's lines (here an hour)
    is for its body, never for the head a request waits on (a cancellation before it would find no response
    to close)."""
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, tick_ms)
    monkeypatch.setattr(stream_mod, "COALESCE_S", 3600.0)

    async def go() -> int:
        with sse_socket_server(1) as (port, _):
            async with StreamClient() as client:
                resp = await asyncio.wait_for(
                    client.post(f"http://127.0.0.1:{port}/v1/completions", b"{}"), 10
                )
                status = resp.status
                resp.release(failed=True)
                return status

    with asyncio.Runner(loop_factory=new_loop) as runner:
        assert runner.run(go()) == 200


def test_a_request_cancelled_before_its_head_closes_its_connection() -> None:
    """A request cancelled (a timeout, `--cancel`) while it waits for the response's head closes its connection,
    so the server sees the client go instead of generating an answer nobody reads."""
    ls = socket.create_server(("127.0.0.1", 0))
    ls.settimeout(10)
    port = ls.getsockname()[1]

    async def go() -> bytes:
        async with StreamClient() as client:
            task = asyncio.create_task(client.post(f"http://127.0.0.1:{port}/v1/completions", b"{}"))
            srv, _ = await asyncio.to_thread(ls.accept)
            with srv:
                srv.settimeout(10)
                got = b""
                while b"\r\n\r\n{}" not in got:  # the whole request is in; no answer is ever sent
                    got += await asyncio.to_thread(srv.recv, 65536)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return await asyncio.to_thread(srv.recv, 65536)  # b"": the client closed it

    try:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            assert runner.run(go()) == b""
    finally:
        ls.close()


async def test_a_connection_asks_for_stamps_when_it_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stamps are asked for at connect, not when the response starts to stream: the kernel's deferred work
    that turns them on then has the request's whole round trip to run (stream._stamp_reads)."""
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, "5")
    with sse_socket_server(0) as (port, _):
        async with StreamClient() as client:
            assert await client.preconnect(f"http://127.0.0.1:{port}/v1/completions", 1) == 1
            (conn,) = client._open
            assert conn.transport is not None
            sock = conn.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.SOL_SOCKET, stream_mod._SO_TIMESTAMPNS) == 1


def test_without_the_tick_a_read_is_stamped_when_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _run("uvloop", "0", monkeypatch)
    assert len(got) == CHUNKS
    for k, (_, _, t_free, (stamp, _)) in enumerate(got):
        assert stamp >= t_free, (k, stamp, t_free)


def test_read_mode_says_how_this_process_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, "5")
    assert stream_mod.read_mode().startswith("kernel receive stamps; flowing streams read every 5 ms")
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, "0")
    assert stream_mod.read_mode() == "stamped at each socket read"
    monkeypatch.setenv(stream_mod.READ_TICK_ENV, "nonsense")  # unreadable: the default, never an error
    assert stream_mod.read_tick_s() == stream_mod.READ_TICK_MS / 1000


def test_run_bench_refuses_a_read_tick_out_of_bounds() -> None:
    for bad in ("-1", "1001", "nan"):
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "ddtree_tui.cli",
                "--run-bench",
                "--url",
                "http://127.0.0.1:9",
                "--read-tick-ms",
                bad,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode != 0, bad
        assert "--read-tick-ms" in p.stderr and "0…1000 ms" in p.stderr, (bad, p.stderr[-500:])

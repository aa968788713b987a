"""Nothing a server sends can exhaust the bench client (issue 25): a raw asyncio server on loopback sends an
endless SSE line, endless headers, an endless body or a huge /server_info; each request fails with the limit
it crossed, the next request on the same client still works, and the server's own count of what it sent
shows the client stopped reading."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson
import pytest

from ddtree_tui.bench.client import INFO_MAX_BYTES, measure_request, server_info
from ddtree_tui.bench.models import BenchTarget, SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.stream import (
    LIMITS_ENV,
    MIB,
    StreamClient,
    StreamLimits,
    default_limits,
    set_default_limits,
)

OK_BODY = (
    b'data: {"text": "hi", "meta_info": {"completion_tokens": 1, "finish_reason": {"type": "length"}}}\n\n'
    b"data: [DONE]\n\n"
)
PIECE = 64 * 1024


@dataclass
class Hostile:
    """What each path sends, and how many bytes each path got out before the client went away."""

    sent: dict[str, int] = field(default_factory=dict)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, OSError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                first = head.split(b"\r\n", 1)[0].decode()
                path = first.split()[1]
                length = 0
                for h in head.split(b"\r\n")[1:]:
                    if h.lower().startswith(b"content-length:"):
                        length = int(h.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                kind = path.strip("/").split("/")[0]
                if kind == "ok":
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(OK_BODY) + OK_BODY)
                    await writer.drain()
                    continue
                self.sent[kind] = 0
                if kind == "line":  # an SSE line that never ends
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ")
                    chunk = b"x" * PIECE
                elif kind == "headers":  # headers that never end
                    writer.write(b"HTTP/1.1 200 OK\r\n")
                    chunk = b"x-pad: " + b"a" * 1000 + b"\r\n"
                elif kind == "error":  # an error status whose body never ends
                    writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n\r\n")
                    chunk = b"overloaded " * 4096
                elif kind == "body":  # short lines, forever
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
                    chunk = b": keep-alive\n" * 4096
                else:  # server_info: a JSON body far larger than any real one
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100000000000\r\n\r\n")
                    chunk = b" " * PIECE
                while True:
                    writer.write(chunk)
                    await writer.drain()
                    self.sent[kind] += len(chunk)
                    if self.sent[kind] > 2 * 1024 * MIB:  # the client never stopped reading: give up
                        writer.close()
                        return

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[Hostile]:
        srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = srv.sockets[0].getsockname()[1]
        async with srv:
            yield self
        srv.close()


def _target(port: int, path: str) -> BenchTarget:
    return BenchTarget(ref=f"h/{path}", base_url=f"http://127.0.0.1:{port}/{path}", algorithm="sim")


async def _measure(client: StreamClient, port: int, path: str) -> tuple[bool, str | None]:
    prompt = Prompt(id="p", messages=[{"role": "user", "content": "q"}])
    r = await measure_request(client, _target(port, path), prompt, SamplingParams(), timeout=120)
    return r.ok, r.error


async def test_an_endless_line_fails_that_request_at_the_default_limit_and_the_next_one_works() -> None:
    async with Hostile().serve() as h, StreamClient() as client:
        ok, err = await _measure(client, h.port, "line")
        assert not ok and err is not None
        assert err.startswith("limit: an SSE line is over 16 MiB (--max-line-bytes)"), err
        assert h.sent["line"] < 64 * MIB  # the client stopped reading soon after the limit
        assert await _measure(client, h.port, "ok") == (True, None)


async def test_endless_headers_and_an_endless_body_fail_with_the_limit_they_crossed() -> None:
    limits = StreamLimits(max_header_bytes=16 * 1024, max_response_bytes=4 * MIB)
    async with Hostile().serve() as h, StreamClient(limits=limits) as client:
        ok, err = await _measure(client, h.port, "headers")
        assert not ok and err is not None and "limit: the response head is over 16 KiB" in err, err
        ok, err = await _measure(client, h.port, "body")
        assert (
            not ok and err is not None and "limit: the response is over 4 MiB (--max-response-bytes)" in err
        )
        assert h.sent["headers"] < 8 * MIB and h.sent["body"] < 16 * MIB
        assert await _measure(client, h.port, "ok") == (True, None)


async def test_an_endless_error_body_is_cut_at_64_kib_and_the_request_fails_with_its_start() -> None:
    async with Hostile().serve() as h, StreamClient() as client:
        ok, err = await _measure(client, h.port, "error")
        assert not ok and err is not None and err.startswith("HTTP 500: overloaded overloaded"), err
        assert h.sent["error"] < 64 * MIB
        assert await _measure(client, h.port, "ok") == (True, None)


async def test_a_huge_server_info_is_not_read_whole() -> None:
    async with Hostile().serve() as h, StreamClient() as client:
        info = await server_info(client, f"http://127.0.0.1:{h.port}/info", timeout=60)
        assert info is None
        assert h.sent["info"] < INFO_MAX_BYTES + 32 * MIB  # far below what 60 s of loopback would carry


def test_limits_reach_child_processes_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LIMITS_ENV, "")  # restored after the test, whatever set_default_limits writes
    assert default_limits() == StreamLimits()
    set_default_limits(StreamLimits(max_line_bytes=2 * MIB))
    assert orjson.loads(os.environ[LIMITS_ENV]) == {"max_line_bytes": 2 * MIB}
    assert default_limits().max_line_bytes == 2 * MIB and StreamClient().limits.max_line_bytes == 2 * MIB

"""A request is credited only with the response to that request, and counts a server cannot mean are not
believed (issue 29). A small asyncio server on loopback misbehaves the ways real servers and proxies do:
an extra response after the one asked for, an unsolicited 500 on an idle kept-alive connection, `100
Continue` before the real answer, impossible token counts. Every request asks for its own number (`reqN`)
and the server answers request N with 10 + N tokens, so each result is checked against what the server sent
for THAT request."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson

from ddtree_tui.bench.client import measure_request
from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.stream import StreamClient

SP = SamplingParams(max_new_tokens=1000)  # 777 tokens would be within what was asked: only crediting can tell


def _response(tokens: int, text: str, **meta: object) -> bytes:
    """One complete /generate answer (Content-Length framed) of `tokens` tokens."""
    m = {"completion_tokens": tokens, "finish_reason": {"type": "length"}, **meta}
    ev = b"data: " + orjson.dumps({"text": text, "meta_info": m}) + b"\n\ndata: [DONE]\n\n"
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(ev)
    return head + ev


UNSOLICITED_500 = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 5\r\n\r\nboom!"


@dataclass
class Misbehaving:
    """Answers request N (its body says `reqN`) with 10 + N tokens, and misbehaves as `mode` says."""

    mode: str
    connections: int = 0
    answered: list[int] = field(default_factory=list)  # request numbers, in the order answered
    aside: asyncio.Event = field(default_factory=asyncio.Event)  # the misbehaviour has been sent
    port: int = 0
    meta: dict[str, object] = field(default_factory=dict)  # extra meta_info (bad counts)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
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
                body = await reader.readexactly(length) if length else b""
                m = re.search(rb"req(\d+)", body)
                n = int(m.group(1)) if m else -1
                self.answered.append(n)
                answer = _response(10 + n, f"answer {n}", **self.meta)
                if self.mode == "continue":  # interim responses first, each in its own write
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await writer.drain()
                    await asyncio.sleep(0.01)
                    writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </x>; rel=preload\r\n\r\n")
                    await writer.drain()
                    writer.write(answer)
                elif self.mode == "extra":  # the answer and, in the same write, one nobody asked for
                    writer.write(answer + _response(777, "not yours"))
                elif self.mode == "extra-later":  # an extra response while the connection is idle
                    writer.write(answer)
                    await writer.drain()
                    await asyncio.sleep(0.05)
                    writer.write(_response(777, "not yours"))
                elif self.mode == "idle-500":  # a 500 on the idle kept-alive connection, no request
                    writer.write(answer)
                    await writer.drain()
                    await asyncio.sleep(0.05)
                    writer.write(UNSOLICITED_500)
                else:
                    writer.write(answer)
                await writer.drain()
                self.aside.set()

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[Misbehaving]:
        srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = srv.sockets[0].getsockname()[1]
        async with srv:
            yield self


async def _ask(client: StreamClient, port: int, n: int, sp: SamplingParams = SP) -> RequestResult:
    target = BenchTarget(ref="h/odd", base_url=f"http://127.0.0.1:{port}", algorithm="baseline")
    return await measure_request(client, target, Prompt(id=f"p{n}", text=f"req{n}"), sp, timeout=30)


async def _three_in_a_row(mode: str) -> Misbehaving:
    """Three requests one after another on one client; each must carry its own answer."""
    async with Misbehaving(mode).serve() as srv, StreamClient() as client:
        for n in range(3):
            srv.aside.clear()
            r = await _ask(client, srv.port, n)
            assert r.ok, (n, r.error)
            assert r.output_tokens == 10 + n, (n, r.output_tokens)  # the answer to THIS request
            await asyncio.wait_for(srv.aside.wait(), 10)  # what the server did aside is on the wire
            await asyncio.sleep(0)
    assert srv.answered == [0, 1, 2]
    return srv


async def test_an_extra_response_is_never_credited_to_the_next_request() -> None:
    srv = await _three_in_a_row("extra")
    assert srv.connections == 3  # the connection that carried bytes after its response was dropped


async def test_an_extra_response_while_idle_drops_the_connection() -> None:
    srv = await _three_in_a_row("extra-later")
    assert srv.connections == 3


async def test_an_unsolicited_500_on_an_idle_connection_is_nobodys_failure() -> None:
    srv = await _three_in_a_row("idle-500")
    assert srv.connections == 3


async def test_100_continue_is_skipped_and_the_final_answer_read() -> None:
    srv = await _three_in_a_row("continue")
    assert srv.connections == 1  # interim responses are protocol: the connection stays good and is reused


async def test_a_well_behaved_server_keeps_one_connection() -> None:
    srv = await _three_in_a_row("plain")
    assert srv.connections == 1  # the check for idle bytes costs no reuse


async def test_an_endless_run_of_interim_responses_fails_the_request() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await reader.readuntil(b"\r\n\r\n")
            for _ in range(100):
                writer.write(b"HTTP/1.1 102 Processing\r\n\r\n")
                await writer.drain()
            await reader.read()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with srv, StreamClient() as client:
        r = await _ask(client, srv.sockets[0].getsockname()[1], 0)
    assert not r.ok and r.error is not None and "more than 16 interim (1xx) responses" in r.error, r.error


async def _with_meta(meta: dict[str, object], sp: SamplingParams = SP) -> RequestResult:
    srv = Misbehaving("plain", meta=meta)
    async with srv.serve(), StreamClient() as client:
        return await _ask(client, srv.port, 0, sp)


async def test_counts_outside_sane_bounds_fail_the_request_with_the_value() -> None:
    r = await _with_meta({"completion_tokens": -1000})
    assert not r.ok and r.error is not None and "bad count: completion_tokens -1000" in r.error, r.error
    assert r.output_tokens is None and r.tok_s is None
    r = await _with_meta({"spec_accept_length": -3})
    assert not r.ok and r.error is not None and "bad count: spec_accept_length -3" in r.error
    assert r.accept_length is None
    r = await _with_meta({"completion_tokens": 2**64 - 1})
    assert not r.ok and r.error is not None and f"completion_tokens {2**64 - 1}" in r.error
    assert r.output_tokens is None
    r = await _with_meta({"spec_verify_ct": -2, "prompt_tokens": -5})
    assert not r.ok and r.error is not None
    assert "spec_verify_ct -2" in r.error and "prompt_tokens -5" in r.error
    # more tokens than the request asked for (past the speculative slack) is not believed either
    r = await _with_meta({"completion_tokens": 100}, SamplingParams(max_new_tokens=4))
    assert not r.ok and r.error is not None, r
    assert "completion_tokens 100 is outside 0…68 (max_new_tokens 4 + 64)" in r.error, r.error
    # and sane counts are fine
    r = await _with_meta({"spec_accept_length": 3.5, "spec_verify_ct": 3, "prompt_tokens": 7})
    assert r.ok and r.output_tokens == 10 and r.accept_length == 3.5 and r.prompt_tokens == 7

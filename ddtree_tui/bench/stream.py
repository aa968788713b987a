"""The benchmark's HTTP/1.1 streaming transport: a raw asyncio protocol with the httptools (llhttp) parser.

Chosen by measurement (benchmarks/stream_candidates.py): per SSE chunk it costs a fraction of httpx's stack
and less than aiohttp's streaming reader, and it is the only candidate that can stamp each chunk with the
time of the socket read that completed it.

- A streaming body is read on a tick, with the kernel's receive stamps (`_Ticker`, the default on Linux:
  `DDTREE_BENCH_READ_TICK_MS`, `--read-tick-ms`, 5 ms): once a 200 SSE head is in, the transport's reading is
  paused and the stream is read through a duplicate of its socket with `recvmsg` and SO_TIMESTAMPNS. Its
  first-token reads are taken the moment the socket is readable; after them, one callback every tick reads
  every flowing stream. Each read carries the kernel's stamp of the last segment it returned, on the
  monotonic clock, so a late tick or a busy loop moves when a chunk is read, never the time recorded for it:
  TTFT and the end of a stream are the times the bytes reached this machine. Chunks of one read share its
  stamp (bench/timeline.py spreads the gap over them). At c=64 × 1 token a chunk it cut a client process's
  CPU per chunk by about a third, most of it the kernel's wakes and reads, and the TTFT error by about half.
- Without the tick (0, TLS, or no kernel stamps), timestamps are taken in `data_received`, i.e. right after
  the loop's `recv()` returned, before any HTTP or JSON parsing: every SSE line carries the monotonic time of
  the read that completed it.
- Reading never waits for parsing: the loop reads every readable socket as soon as it is readable (there is
  no flow control between the parser and the reader); the request's task consumes the timestamped lines in
  batches, at most every COALESCE_S (200 ms) while a stream flows, so a slow JSON parse shifts when a line is
  scored, never the time recorded for it, and a chunk costs a socket read, not a task switch. Each of those
  wakes is a step of the request's task (its batches, the progress callback): 200 ms rather than 50 took 3–5 %
  of the CPU per token at c=64 and up to 9 % of a poisson run's measured phase (issue 26, benchmarks/peers.py);
  a live view's tok/s updates up to 5 times a second per request, and a stream's end wakes its reader at once.
- Connections are kept alive and reused per (scheme, host, port), so a forwarded port (an SSH channel a
  connection) pays its connect once, not per request; `preconnect` opens them before the clock starts, so
  no measured request (its TTFT) pays for a connect when more streams start at once than a warm-up made.
- A request is credited only with the response to that request (HTTP/1.1 has no request ids: on a kept-alive
  connection the order of bytes is all there is, so a connection that breaks the order is dropped, never
  reused): `1xx` interim responses are skipped and the final one read (RFC 9110 section 15.2); any byte
  after a complete response marks the connection dead; a pooled connection that got bytes (or EOF) while
  idle, or has anything readable when it is taken, is closed and a fresh one used.

- Every read has a limit (`StreamLimits`: one SSE line, the response head, a body read whole, all the bytes
  of one response): a server that crosses one fails that request with a `StreamLimitError` that names the
  limit, and the connection is closed, so no server can grow the client or stall its loop. Lines are
  assembled in linear time (a long line is a list of pieces joined once, never re-copied per read).
  The defaults hold any real SGLang stream; `DDTREE_STREAM_LIMITS` (JSON, set by `--max-line-bytes` and
  `--max-response-bytes`) changes them for this process and the worker processes it starts.

Anything the server or the network does is a `StreamError` (or `TimeoutError`); nothing else escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import select
import socket
import ssl
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable
from urllib.parse import SplitResult, urlsplit

import httptools
from pydantic import BaseModel, ConfigDict, Field, ValidationError

Line = tuple[float, bytes]  # (monotonic time of the socket read, one SSE line without its line break)

CONNECT_TIMEOUT = 10.0
MAX_INTERIM = 16  # 1xx interim responses before the final one (real servers send one 100 or 103)
COALESCE_S = 0.200  # the consumer of a stream wakes at most this often while lines arrive (stamps are exact)
PRECONNECT_AT_ONCE = 64  # connects in flight at once while filling the pool before a measured phase
# reads are stamped in data_received and parsed once every socket that was ready in that loop turn has been
# read and stamped (_Reads); DDTREE_BENCH_PARSE=inline parses each read at once, for a side-by-side measurement
PARSE_ENV = "DDTREE_BENCH_PARSE"
MAX_BODY = 64 * 1024  # of an error response: what is kept of it (the rest is read and dropped)
KIB, MIB, GIB = 1024, 1024 * 1024, 1024 * 1024 * 1024
LIMITS_ENV = "DDTREE_STREAM_LIMITS"
# flowing streams are read together every this many ms (_Ticker), each read stamped by the kernel; 0: a wake
# and a read per readable socket, stamped when the read returned (the way every stream was read before)
READ_TICK_ENV = "DDTREE_BENCH_READ_TICK_MS"
READ_TICK_MS = 5.0
READ_SIZE = 64 * 1024  # one recvmsg of a ticked stream (a tick's worth of SSE at any real rate)
# a stream joins the tick only while this many are flowing in the process: with fewer, a tick mostly finds
# nothing new (c=1 × 150 chunks/s: a tick every 5 ms cost more CPU per chunk than a read per chunk), so each
# of their reads is taken at once, stamped by the kernel all the same
TICK_MIN_STREAMS = 4
TICK_SLICE = 8  # streams a tick reads in one callback before the loop polls again (_Ticker._slice)
EAGER_READS = 2  # reads with lines a stream takes one by one (the first token's) before it joins the tick
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; SCM_TIMESTAMPNS has the same value
_CMSG_TS = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0


class StreamLimits(BaseModel):
    """How much one response may make the client read: crossing any of these fails the request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # one SSE line: SGLang's cumulative /generate sends the whole text so far on each line (with output ids,
    # a 32k-token answer is well under 1 MiB)
    max_line_bytes: int = Field(default=16 * MIB, ge=1 * KIB, le=4 * GIB)
    # the status line and headers
    max_header_bytes: int = Field(default=64 * KIB, ge=1 * KIB, le=64 * MIB)
    # a body read whole (/server_info, /v1/models); an error body is read to its end, 64 KiB of it kept
    max_body_bytes: int = Field(default=16 * MIB, ge=1 * KIB, le=4 * GIB)
    # every byte of one response: a cumulative stream of a long answer sends its text again on every line,
    # so this is large; it stops a server that never ends a response
    max_response_bytes: int = Field(default=8 * GIB, ge=1 * KIB, le=1024 * GIB)


def default_limits() -> StreamLimits:
    """The limits of this process: `DDTREE_STREAM_LIMITS` (a JSON object of StreamLimits) or the defaults."""
    raw = os.environ.get(LIMITS_ENV)
    if not raw:
        return StreamLimits()
    try:
        return StreamLimits.model_validate_json(raw)
    except ValidationError:
        return StreamLimits()  # set_default_limits validated it; a hand-made bad value falls back safely


def set_default_limits(limits: StreamLimits) -> None:
    """Make `limits` this process's default, and its children's (bench worker processes inherit it)."""
    os.environ[LIMITS_ENV] = limits.model_dump_json(exclude_defaults=True)


class StreamError(Exception):
    """The connection failed, or the server broke HTTP: the message says which."""


class StreamLimitError(StreamError):
    """The response crossed one of the StreamLimits: the message names the limit and the option that sets it."""


def _size(n: int) -> str:
    for unit, k in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} bytes"


def _key(u: SplitResult) -> tuple[str, str, int]:
    """The pool's key of a URL: (scheme, host, port)."""
    scheme = u.scheme or "http"
    return scheme, u.hostname or "127.0.0.1", u.port or (443 if scheme == "https" else 80)


class _Unsolicited(Exception):
    """A response began after the one asked for was complete: raised in the parser's callback to stop it."""


def _readable(c: _Conn) -> bool:
    """Whether an idle connection's socket has anything to read (bytes or EOF) that the loop has not handed
    to the protocol yet: one poll(2) with no wait."""
    sock = c.transport.get_extra_info("socket") if c.transport is not None else None
    if sock is None:
        return False
    try:
        p = select.poll()
        p.register(sock.fileno(), select.POLLIN | select.POLLPRI)
        return bool(p.poll(0))
    except (OSError, ValueError):
        return True  # a socket that cannot be polled is not one to send on


class _Reads:
    """The reads of one loop turn, parsed after the turn's last read: the loop calls `data_received` for every
    socket that was ready, one after another, so a read parsed there delays the stamp of every read after it
    in the same turn by its parse (httptools, the line split: a few µs each; at c=64 the first chunks of many
    streams are ready at once). Each read is stamped and kept; one `call_soon` per turn parses them all, in
    order (asyncio and uvloop both run what is scheduled during a turn's I/O callbacks after all of them).
    The CPU is the same: one callback a turn and a tuple a read."""

    __slots__ = ("conns", "scheduled")

    def __init__(self) -> None:
        self.conns: list[_Conn] = []
        self.scheduled = False

    def add(self, c: _Conn) -> None:
        self.conns.append(c)
        if not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        conns, self.conns = self.conns, []
        for c in conns:
            if c.pending:
                c.drain()


def defer_parse() -> bool:
    """Whether this process parses a turn's reads after the turn (the default) or each read at once."""
    return os.environ.get(PARSE_ENV) != "inline"


def read_tick_s() -> float:
    """This process's read tick in seconds (READ_TICK_ENV, ms; 0 or unreadable below 0: no tick)."""
    raw = os.environ.get(READ_TICK_ENV)
    try:
        ms = READ_TICK_MS if raw is None or raw == "" else float(raw)
    except ValueError:
        ms = READ_TICK_MS
    return max(0.0, min(ms, 1000.0)) / 1000.0 if math.isfinite(ms) else READ_TICK_MS / 1000.0


def _kernel_stamps() -> bool:
    """Whether this platform stamps TCP reads (SO_TIMESTAMPNS through recvmsg): Linux."""
    return _CMSG_TS > 0 and hasattr(socket.socket, "recvmsg") and sys.platform.startswith("linux")


def read_mode() -> str:
    """How this process (and the worker processes it starts) reads and stamps a streaming body, in words:
    what every result's times are measured from."""
    tick = read_tick_s()
    if tick > 0 and _kernel_stamps():
        return (
            f"kernel receive stamps; flowing streams read every {tick * 1000:g} ms (the first token's reads at "
            "once)"
        )
    return "stamped at each socket read"


# told (lateness s, now) each time a read tick runs: a timer that fires anyway, so a loop monitor need not wake
# for one of its own while streams flow (bench/loadmon.py LoopMonitor)
TICK_OBSERVERS: list[Callable[[float, float], None]] = []


def _stamp_reads(transport: asyncio.BaseTransport) -> None:
    """Have the kernel stamp this connection's reads from its connect on, not only once its response
    streams. Linux turns receive stamps on for the whole host through deferred work the first time a socket
    asks (net_enable_timestamp), and a segment that arrives before that work has run carries no stamp: its
    read falls back to the read's own time. Asked at connect, that work is done long before a first token
    but on a host too busy to run it, and an open connection keeps stamps on between streams."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError, AttributeError, ValueError):
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)


def _mono_minus_real() -> float:
    """CLOCK_MONOTONIC − CLOCK_REALTIME now, to put a kernel stamp (realtime) on the monotonic clock every
    other time is on: of three readings, the one whose monotonic reads bracket its realtime read most tightly
    (a preemption between the reads would skew it by however long it lasted)."""
    best, off = math.inf, 0.0
    for _ in range(3):
        a = time.monotonic()
        r = time.time()
        b = time.monotonic()
        if b - a < best:
            best, off = b - a, (a + b) / 2 - r
    return off


class _Ticker:
    """Flowing streams read together, every `tick` seconds, by one callback: a read per stream per tick instead of
    a wake, an epoll round and a read per chunk (issue 26: at c=64 × 1 token a chunk those were about half of a
    client process's CPU, most of it in the kernel). The times are not the tick's: each read carries the
    kernel's receive stamp of the last segment it returned (SO_TIMESTAMPNS), so the end of a stream is timed
    to when its last bytes reached this machine, however late the tick read them, and the chunks one read
    brought share that time (bench/timeline.py spreads a read's gap over its tokens, as it does for any read
    that held several chunks). A stream's first reads (its first token) are not ticked: each is read the
    moment the socket is readable (EAGER_READS), so TTFT is the kernel's stamp of the first chunk itself."""

    __slots__ = ("conns", "due", "flowing", "handle", "tick", "todo")

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.due = 0.0  # when the next tick should run (time.monotonic): its lateness is the loop's lag
        self.flowing = 0  # streams read through their duplicate now (at once or on the tick)
        self.conns: dict[_Conn, None] = {}  # insertion-ordered set: streams are read in the order they joined
        self.handle: asyncio.TimerHandle | None = None
        self.todo: list[_Conn] = []  # this tick's streams not read yet (TICK_SLICE a callback)

    def add(self, c: _Conn) -> None:
        self.conns[c] = None
        if self.handle is None:
            self.due = time.monotonic() + self.tick
            self.handle = asyncio.get_running_loop().call_later(self.tick, self.run)

    def remove(self, c: _Conn) -> None:
        self.conns.pop(c, None)
        if not self.conns and self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def run(self) -> None:
        self.handle = None
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        for note in TICK_OBSERVERS:  # how late this timer ran: the loop's lag (bench/loadmon.py)
            note(start - self.due, start)
        self.todo = list(self.conns)
        self._slice(_mono_minus_real())  # kernel stamps are CLOCK_REALTIME: to monotonic, as of now
        if self.conns:  # the next tick counts from this one's start
            self.due = start + self.tick
            self.handle = loop.call_later(self.tick, self.run)

    def _slice(self, off: float) -> None:
        """TICK_SLICE streams of this tick; the rest in a callback of their own, so the loop polls in between
        and a first token's read (EAGER_READS) waits for at most a slice, not a whole tick's reads."""
        todo = self.todo
        n = min(TICK_SLICE, len(todo))
        batch, self.todo = todo[:n], todo[n:]
        for c in batch:
            c.read_ticked(off)  # one that left the tick meanwhile returns at once
        if self.todo:
            asyncio.get_running_loop().call_soon(self._slice, off)


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 connection, one response at a time."""

    # slots: its attributes are read on every chunk, and slot access stays fast however many there are
    __slots__ = (
        "_timer",
        "_waiter",
        "body",
        "body_full",
        "body_len",
        "body_max",
        "complete",
        "discard",
        "eager",
        "error",
        "framed",
        "got_bytes",
        "head_bytes",
        "idle",
        "interim",
        "interims",
        "keep_alive",
        "keep_body",
        "limit_hit",
        "limits",
        "lines",
        "lost",
        "max_line",
        "max_response",
        "on_complete",
        "parser",
        "partial",
        "partial_len",
        "pending",
        "reads",
        "resp_bytes",
        "rsock",
        "sse",
        "status",
        "t_read",
        "ticker",
        "ticking",
        "transport",
    )

    def __init__(
        self, limits: StreamLimits | None = None, reads: _Reads | None = None, ticker: _Ticker | None = None
    ) -> None:
        self.transport: asyncio.Transport | None = None
        self.reads = reads  # None: each read is parsed in data_received
        self.ticker = ticker  # None: a streaming body is read by the transport, a read per readable socket
        self.rsock: socket.socket | None = None  # a duplicate of the socket, read with its kernel stamps
        self.ticking = False  # the transport's reading is paused: this stream's bytes come through rsock
        self.eager = 0  # reads with lines still to be read one by one (the first token's) before the tick
        self.pending: list[tuple[float, bytes]] = []  # (read time, bytes) stamped, not parsed yet
        self.parser = httptools.HttpResponseParser(self)
        self.lost = False
        self.idle = False  # in the pool: nothing was asked, so any byte that comes is not an answer
        self.limits = limits or StreamLimits()
        self.max_line = self.limits.max_line_bytes  # read on every chunk: plain attributes
        self.max_response = self.limits.max_response_bytes
        self.reset()

    def reset(self) -> None:
        self.status: int | None = None  # of the final response (1xx interim ones are skipped)
        self.interim = False  # the response being parsed is a 1xx interim one
        self.interims = 0
        self.keep_alive = False
        self.complete = False
        self.framed = False  # Content-Length or chunked; else the body ends when the server closes
        self.error: str | None = None
        self.limit_hit = False  # the error is a crossed StreamLimits
        self.sse = False  # a 200 streaming response, its body read as lines (on_body's hot path)
        self.lines: list[Line] = []
        self.partial: list[bytes] = []  # the pieces of a line not ended yet: joined once, when it ends
        self.partial_len = 0
        self.body = bytearray()
        self.body_len = 0
        self.body_full = False  # an error body reached MAX_BODY: what is kept is all read() returns
        self.head_bytes = 0
        self.resp_bytes = 0
        self.got_bytes = False
        self.t_read = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.on_complete: Callable[[], None] | None = None  # set when released before the end
        self.discard = False
        self.keep_body = False  # a plain (non-streaming) response: the body is kept whole
        self.body_max = self.limits.max_body_bytes  # of a body kept whole

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        t = time.monotonic()  # the read time: before any parsing
        self.got_bytes = True
        if self.error is not None:
            return  # failed (a limit crossed): the connection is closing, nothing more is parsed
        if self.idle:  # bytes nobody asked for (an unsolicited response): the connection is dropped
            self.close()
            return
        if self.reads is None:
            self.t_read = t
            self._feed(data)
            return
        if not self.pending:
            self.reads.add(self)
        self.pending.append((t, data))

    def drain(self) -> None:
        """Parse the reads stamped and kept by data_received, in order, each under its own read time."""
        pending, self.pending = self.pending, []
        for t, data in pending:
            self.t_read = t
            self._feed(data)

    def _feed(self, data: bytes) -> None:
        if self.error is not None:
            return
        no_head = self.status is None  # the response's head not in yet: its waiter is woken when it is
        self.resp_bytes += len(data)
        if self.resp_bytes > self.max_response:
            self._over(f"the response is over {_size(self.max_response)} (--max-response-bytes)")
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.error = "the server switched protocols"
        except httptools.HttpParserError as e:
            if isinstance(e.__context__, _Unsolicited):
                self.close()  # bytes after the complete response: not ours, and the connection is out of step
            elif self.error is None:
                self.error = f"bad HTTP from the server: {e}"
        if self.status is None and self.error is None:
            self.head_bytes += len(data)  # the whole read is head: the headers are not complete yet
            if self.head_bytes > self.limits.max_header_bytes:
                self._over(f"the response head is over {_size(self.limits.max_header_bytes)}")
        if self.complete or self.error is not None or self.status is None or self.status != 200 or no_head:
            self._wake()
        elif self._timer is None and self._waiter is not None:
            # coalesce: the reader of the lines wakes at most every COALESCE_S, not once a chunk; the lines
            # carry their read times, so waking later changes no measurement, only what it costs
            self._timer = asyncio.get_running_loop().call_later(COALESCE_S, self._wake)

    def _over(self, why: str) -> None:
        """A limit crossed: the request fails with `why`, and the connection is closed (nothing more read)."""
        if self.error is None:
            self.error = why
            self.limit_hit = True
        self.sse = False
        self.partial, self.partial_len, self.lines = [], 0, []
        self.body = bytearray()
        if self.rsock is not None:
            self._drop_rsock()
        if self.transport is not None:
            self.transport.close()
        self.lost = True
        self._wake()

    def _eof_ends_body(self) -> None:
        # a response without Content-Length or chunked encoding (HTTP/1.0, or `Connection: close` servers
        # such as http.server's) is complete when the server closes: RFC 9112 section 6.3, rule 8
        if not self.complete and self.error is None and self.status is not None and not self.framed:
            self.on_message_complete()

    def eof_received(self) -> bool | None:
        if self.pending:  # what came before the end is parsed first
            self.drain()
        self._eof_ends_body()
        self.lost = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.rsock is not None:
            self._drop_rsock()
        if self.pending:
            self.drain()
        if exc is None:
            self._eof_ends_body()
        self.lost = True
        if exc is not None and self.error is None and not self.complete:
            self.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self._wake()

    # httptools callbacks
    def on_message_begin(self) -> None:
        if self.complete:
            raise _Unsolicited

    def on_header(self, name: bytes, value: bytes) -> None:
        n = name.lower()
        if n == b"content-length" or (n == b"transfer-encoding" and b"chunked" in value.lower()):
            self.framed = True

    def on_headers_complete(self) -> None:
        code = self.parser.get_status_code()
        if 100 <= code < 200 and code != 101:  # interim (100 Continue, 103 Early Hints): the final follows
            self.interim = True
            return
        self.status = code
        self.keep_alive = self.parser.should_keep_alive()
        self.sse = self.status == 200 and not self.keep_body and not self.discard and self.error is None
        if self.sse and self.ticker is not None and not self.ticking:
            self._take_over()

    # the ticked read (_Ticker): a streaming body read through a duplicate of the socket, with kernel stamps
    def _take_over(self) -> None:
        """From here on this stream's bytes are read by us through `rsock` (one by one while `eager`, then by
        the ticker), the transport's own reading paused; plain TCP only (TLS bytes need the transport)."""
        t, tk = self.transport, self.ticker
        if tk is None or t is None or t.is_closing() or t.get_extra_info("sslcontext") is not None:
            return
        if self.rsock is None:
            sock = t.get_extra_info("socket")
            if sock is None:
                return
            try:
                self.rsock = socket.socket(fileno=os.dup(sock.fileno()))
                self.rsock.setblocking(False)
                self.rsock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            except (OSError, ValueError):
                self._drop_rsock()
                return
        t.pause_reading()
        self.ticking = True
        tk.flowing += 1
        self.eager = EAGER_READS
        asyncio.get_running_loop().add_reader(self.rsock.fileno(), self._eager_ready)

    def _eager_ready(self) -> None:
        self.read_ticked(_mono_minus_real())

    def read_ticked(self, off: float) -> None:
        """Read what the socket holds now, each read parsed under its kernel stamp (+ `off`: realtime to
        monotonic); once the response is complete (or failed, or the server closed), the transport reads
        again (what comes while the connection is pooled is its business, as before)."""
        rs = self.rsock
        if rs is None or not self.ticking:
            return
        while True:
            try:
                data, anc, _, _ = rs.recvmsg(READ_SIZE, _CMSG_TS)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._give_back(resume=False)
                if self.error is None and not self.complete:
                    self.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                self.close()
                self._wake()
                return
            now = time.monotonic()
            if self.idle:  # bytes nobody asked for (cannot come while ticking: a guard, as data_received)
                self.close()
                return
            if not data:  # the server closed: what the transport's eof_received would have done
                self._give_back(resume=False)
                self.eof_received()
                self.close()
                return
            t = now
            if anc and len(anc[0][2]) >= 16:
                sec, ns = struct.unpack_from("qq", anc[0][2])
                t = min(now, max(sec + ns * 1e-9 + off, self.t_read))  # never ahead of now, never back
            had = len(self.lines)
            self.got_bytes = True
            self.t_read = t
            self._feed(data)
            if self.complete or self.error is not None or self.lost or not self.sse:
                self._give_back()
                return
            if self.eager > 0 and len(self.lines) > had:
                self.eager -= 1
                if not self.eager:  # the first token is in
                    assert self.ticker is not None
                    if self.ticker.flowing < TICK_MIN_STREAMS:
                        self.eager = -1  # few streams: each read at once to the end (a tick would cost more)
                    else:  # from now on the tick reads this stream
                        asyncio.get_running_loop().remove_reader(rs.fileno())
                        self.ticker.add(self)
                        return
            if len(data) < READ_SIZE:
                return  # all there was (one more recvmsg would only say so)

    def _give_back(self, resume: bool = True) -> None:
        """The transport reads this connection again (the stream ended or failed; not when it is closing)."""
        if not self.ticking:
            return
        self.ticking = False
        if self.ticker is not None:
            self.ticker.flowing -= 1
        if self.eager and self.rsock is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self.rsock.fileno())
        self.eager = 0
        if self.ticker is not None:
            self.ticker.remove(self)
        t = self.transport
        if resume and t is not None and not t.is_closing() and not self.lost:
            t.resume_reading()

    def _drop_rsock(self) -> None:
        self._give_back(resume=False)
        rs, self.rsock = self.rsock, None
        if rs is not None:
            with contextlib.suppress(OSError):
                rs.close()

    def on_body(self, body: bytes) -> None:
        if self.sse:  # the hot path: a 200 streaming response, read line by line
            parts = body.split(b"\n")  # (cheaper than a `b"\n" in body` test first)
            if len(parts) == 1:  # a piece of a longer line: kept, not copied, until the line ends
                self.partial_len += len(body)
                if self.partial_len > self.max_line:
                    self._line_over()
                    return
                self.partial.append(body)
                return
            if self.partial:
                if self.partial_len + len(parts[0]) > self.max_line:
                    self._line_over()
                    return
                self.partial.append(parts[0])
                parts[0] = b"".join(self.partial)
                self.partial, self.partial_len = [], 0
            last = parts.pop()
            if len(body) > self.max_line and any(len(p) > self.max_line for p in (*parts, last)):
                self._line_over()
                return
            if last:
                self.partial, self.partial_len = [last], len(last)
            t = self.t_read
            for p in parts:
                if p and p != b"\r":
                    self.lines.append((t, p))
            return
        if self.discard or self.error is not None:
            return
        if self.keep_body:
            self.body_len += len(body)
            if self.body_len > self.body_max:
                self._over(f"the body is over {_size(self.body_max)}")
                return
            self.body += body
        elif not self.body_full:  # an error body: its first 64 KiB are kept, then reading stops
            self.body += body[: MAX_BODY - len(self.body)]
            if len(self.body) >= MAX_BODY:
                self.body_full = True  # read() returns it; release() closes the connection
                self._wake()

    def _line_over(self) -> None:
        self._over(f"an SSE line is over {_size(self.max_line)} (--max-line-bytes)")

    def on_message_complete(self) -> None:
        if self.interim:  # skipped: the parser goes on to the final response of this request
            self.interim = False
            self.framed = False
            self.interims += 1
            if self.interims > MAX_INTERIM and self.error is None:
                self.error = f"the server sent more than {MAX_INTERIM} interim (1xx) responses"
                self.close()
                self._wake()
            return
        if self.partial:
            line = b"".join(self.partial)
            self.partial, self.partial_len = [], 0
            if line.strip():
                self.lines.append((self.t_read, line))
        self.complete = True
        if self.ticking:  # the transport reads the connection again (as it would anything that comes now)
            self._give_back()
        if self.on_complete is not None:  # released early (after [DONE]): back to the pool now
            cb, self.on_complete = self.on_complete, None
            asyncio.get_running_loop().call_soon(cb)

    # consumer side
    def _wake(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        if self.rsock is not None:
            self._drop_rsock()
        if self.transport is not None:
            self.transport.close()
        self.lost = True


class Response:
    """A streaming response: `status`, then `batches()` of timestamped SSE lines, or `read()` the body."""

    def __init__(self, client: StreamClient, key: tuple[str, str, int], conn: _Conn, t_send: float) -> None:
        self._client = client
        self._key = key
        self._conn = conn
        self._released = False
        # monotonic time the request was sent: taken once its bytes were ready to go, before a connection
        # was taken (a connect, when one is needed, is part of the wait) and the write
        self.t_send = t_send

    @property
    def status(self) -> int:
        return self._conn.status or 0

    def _fail(self) -> StreamError | None:
        c = self._conn
        if c.error is not None:
            return StreamLimitError(c.error) if c.limit_hit else StreamError(c.error)
        if c.lost and not c.complete:
            return StreamError("the server closed the connection before the response was complete")
        return None

    async def batches(self) -> AsyncIterator[list[Line]]:
        """Every SSE line as it arrived, in batches of what came in since the last batch."""
        c = self._conn
        while True:
            if c.lines:
                out, c.lines = c.lines, []
                yield out
                continue
            if c.complete:
                return
            err = self._fail()
            if err is not None:
                raise err
            await c.wait()

    async def read(self) -> bytes:
        """The whole body (of an error response: its first 64 KiB, the rest never read); StreamLimitError
        above max_body_bytes."""
        c = self._conn

        while not c.complete and not c.body_full:
            err = self._fail()
            if err is not None:
                raise err
            await c.wait()
        return bytes(c.body)

    def release(self, failed: bool = False) -> None:
        """Back to the pool when the response was read to its end and the connection may be kept."""
        if self._released:
            return
        self._released = True
        c = self._conn
        if failed or c.lost or c.error is not None or (c.complete and not c.keep_alive):
            c.close()
        elif c.complete:
            self._client._put(self._key, c)
        elif c.status == 200:  # stopped reading at [DONE]: pooled when the rest of the response arrives
            c.lines = []
            c.discard = True
            c.sse = False
            c.on_complete = lambda: (
                self._client._put(self._key, c) if c.keep_alive and not c.lost else c.close()
            )
        else:
            c.close()

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.release(failed=exc_type is not None)


class StreamClient:
    """A pool of kept-alive HTTP/1.1 connections for streaming POSTs; `close()` (or `async with`) ends them."""

    def __init__(
        self,
        connect_timeout: float = CONNECT_TIMEOUT,
        max_idle_per_host: int = 4096,
        limits: StreamLimits | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.limits = limits or default_limits()
        self.max_idle = max_idle_per_host
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._open: list[_Conn] = []  # every connection made, so close() ends those still in use too
        self._ssl: ssl.SSLContext | None = None
        self._reads = _Reads() if defer_parse() else None  # this pool's reads of a loop turn (_Reads)
        tick = read_tick_s()
        self._ticker = _Ticker(tick) if tick > 0 and _kernel_stamps() else None  # flowing streams' reads

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self._open:
            c.close()
        self._open.clear()
        self._idle.clear()

    def _put(self, key: tuple[str, str, int], c: _Conn) -> None:
        pool = self._idle.setdefault(key, [])
        if len(pool) < self.max_idle and not c.lost and not c.pending:  # bytes after the response: out
            c.reset()
            c.idle = True
            pool.append(c)
        else:
            c.close()

    async def _connect(self, key: tuple[str, str, int]) -> _Conn:
        scheme, host, port = key
        ctx: ssl.SSLContext | None = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            ctx = self._ssl
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                tr, proto = await loop.create_connection(
                    lambda: _Conn(self.limits, self._reads, self._ticker), host, port, ssl=ctx
                )
            if self._ticker is not None:
                _stamp_reads(tr)
        except TimeoutError:
            raise StreamError(
                f"connect to {host}:{port} timed out after {self.connect_timeout:g} s"
            ) from None
        except OSError as e:
            raise StreamError(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        self._open = [c for c in self._open if not c.lost]
        self._open.append(proto)
        return proto

    async def preconnect(self, url: str, n: int) -> int:
        """Make `n` connections to `url`'s host wait idle in the pool (those there count; at most the pool's
        size), opened PRECONNECT_AT_ONCE at a time (a server's listen backlog is finite); how many are idle
        now. A connect that fails raises StreamError; the connections opened before it stay pooled."""
        key = _key(urlsplit(url))
        pool = self._idle.setdefault(key, [])
        pool[:] = [c for c in pool if not c.lost and c.transport is not None and not c.transport.is_closing()]
        want = min(n, self.max_idle) - len(pool)
        while want > 0:
            k = min(want, PRECONNECT_AT_ONCE)
            made = await asyncio.gather(*(self._connect(key) for _ in range(k)), return_exceptions=True)
            for c in made:
                if isinstance(c, _Conn):
                    c.idle = True
                    pool.append(c)
            for c in made:
                if isinstance(c, BaseException):
                    raise c
            want -= k
        return len(pool)

    def idle_count(self, url: str) -> int:
        """Connections to `url`'s host idle in the pool now."""
        return sum(1 for c in self._idle.get(_key(urlsplit(url)), []) if not c.lost)

    async def post(self, url: str, body: bytes, headers: dict[str, str] | None = None) -> Response:
        """Send a POST and wait for the response's status line and headers."""
        return await self.request("POST", url, body, headers)

    async def get(
        self, url: str, headers: dict[str, str] | None = None, max_bytes: int | None = None
    ) -> Response:
        """A GET whose body is read whole with `read()`: at most `max_bytes` (and the limits' max_body_bytes)."""
        return await self.request("GET", url, None, headers, stream=False, max_bytes=max_bytes)

    async def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        stream: bool = True,
        max_bytes: int | None = None,
    ) -> Response:
        """Send a request and wait for the response's status line and headers. `stream`: the body is SSE,
        read it with `batches()`; otherwise `read()` it whole."""
        u = urlsplit(url)
        key = _key(u)
        _, host, port = key
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        hostport = host if u.port is None else f"{host}:{port}"
        head = f"{method} {path} HTTP/1.1\r\nhost: {hostport}\r\n"
        if body is not None:
            head += f"content-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {len(body)}\r\n"
        for k, v in (headers or {}).items():
            head += f"{k}: {v}\r\n"
        req = head.encode("latin-1") + b"\r\n" + (body or b"")
        retried = False
        t_send = time.monotonic()  # the bytes are ready: what remains is taking a connection and the write
        while True:
            conn, reused = await self._take(key)
            conn.keep_body = not stream
            cap = self.limits.max_body_bytes
            conn.body_max = min(cap, max_bytes) if max_bytes is not None else cap
            assert conn.transport is not None
            conn.transport.write(req)
            try:
                while conn.status is None and conn.error is None and not conn.lost:
                    await conn.wait()
            except BaseException:  # cancelled (a timeout, --cancel) before the head: the server sees it go
                conn.close()
                raise
            if conn.status is not None:
                return Response(self, key, conn, t_send)
            conn.close()
            if conn.limit_hit:
                raise StreamLimitError(conn.error or "a limit was crossed")
            # a kept-alive connection the server had closed while idle: once more on a fresh one
            if reused and not conn.got_bytes and not retried:
                retried = True
                continue
            raise StreamError(conn.error or "the server closed the connection without a response")

    async def _take(self, key: tuple[str, str, int]) -> tuple[_Conn, bool]:
        pool = self._idle.get(key)
        while pool:
            c = pool.pop()
            if (
                not c.lost
                and not c.pending
                and c.transport is not None
                and not c.transport.is_closing()
                and not _readable(c)
            ):
                c.idle = False
                return c, True
            c.close()  # closed by the server, or it sent something while idle: never reused
        return await self._connect(key), False

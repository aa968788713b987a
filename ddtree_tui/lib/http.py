"""The one general HTTP client of the package (aiohttp; the collector's server and textual-serve need it anyway),
for everything except the measured benchmark hot path (`bench/stream.py`, a raw client of its own).

- `session()` never reads HTTP_PROXY/HTTPS_PROXY/NO_PROXY (`trust_env=False`): our traffic goes to loopback
  forwards, the collector, Prometheus, and must not take a detour through a proxy set for other programs.
- Every body read through here has a size cap (`read_body`, `read_json`, `read_text`, `iter_lines`): a peer
  that sends more is `BodyTooLarge`, an error that says where and how much, never a process out of memory.
- `describe(e)` is one short reason for a failed request, for a status line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from ddtree_tui.lib.jsontypes import JsonValue

# aiohttp is imported where a session is first made (~0.15 s of import: not before the TUI's first frame)
if TYPE_CHECKING:
    import aiohttp

MIB = 1 << 20
BODY_CAP = 16 * MIB  # a snapshot of 200 hosts is a few MiB; a Prometheus vector for them about as much
LINE_CAP = 4 * MIB  # one server-sent event or one JSON line


class HttpError(Exception):
    """The request could not be made, or its answer was not what it should be."""


class BodyTooLarge(HttpError):
    """A body (or one line of a stream) over the cap the reader set."""


def session(
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = 10.0,
    read_timeout: float | None = None,
) -> aiohttp.ClientSession:
    """A client session that ignores the proxy environment; `timeout` bounds connecting and each read unless
    `read_timeout` says otherwise for reads (a long stream, a long intent)."""
    import aiohttp

    t = aiohttp.ClientTimeout(
        total=None,
        connect=timeout,
        sock_connect=timeout,
        sock_read=read_timeout if read_timeout is not None else timeout,
    )
    return aiohttp.ClientSession(headers=dict(headers or {}), timeout=t, trust_env=False)


async def read_body(resp: aiohttp.ClientResponse, cap: int = BODY_CAP) -> bytes:
    """The whole body, or BodyTooLarge once it passes `cap` bytes (nothing past the cap is read)."""
    if resp.content_length is not None and resp.content_length > cap:
        raise BodyTooLarge(f"{resp.url}: the body is {resp.content_length} bytes, over the {cap} byte cap")
    buf = bytearray()
    async for chunk in resp.content.iter_any():
        buf += chunk
        if len(buf) > cap:
            raise BodyTooLarge(f"{resp.url}: the body is over the {cap} byte cap")
    return bytes(buf)


async def read_text(resp: aiohttp.ClientResponse, cap: int = BODY_CAP) -> str:
    return (await read_body(resp, cap)).decode(resp.get_encoding() if resp.charset else "utf-8", "replace")


async def read_json(resp: aiohttp.ClientResponse, cap: int = BODY_CAP) -> JsonValue:
    """The body parsed as JSON; ValueError when it is not JSON, BodyTooLarge when over the cap."""
    value: JsonValue = json.loads(await read_body(resp, cap))
    return value


async def iter_lines(resp: aiohttp.ClientResponse, cap: int = LINE_CAP) -> AsyncIterator[str]:
    """The body's lines (without their end) as they arrive; BodyTooLarge for a line over `cap` bytes."""
    too_long = f"{resp.url}: a line over the {cap} byte cap"
    buf = b""
    async for chunk in resp.content.iter_any():
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if len(line) > cap:
                raise BodyTooLarge(too_long)
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        if len(buf) > cap:
            raise BodyTooLarge(too_long)
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", "replace")


def describe(e: BaseException) -> str:
    """A failed request in a few words."""
    import aiohttp

    if isinstance(e, aiohttp.ClientConnectorError):
        return "connection refused"
    if isinstance(e, asyncio.TimeoutError | TimeoutError):
        return "timed out"
    if isinstance(e, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return "the connection dropped"
    return str(e) or type(e).__name__


if TYPE_CHECKING:
    #: what a request through this module may raise besides BodyTooLarge: catch these for "did not answer"
    #: (`except http.REQUEST_ERRORS`; made on first use by `__getattr__` below, which imports aiohttp)
    REQUEST_ERRORS: tuple[type[BaseException], ...]


def __getattr__(name: str) -> tuple[type[BaseException], ...]:
    """`REQUEST_ERRORS`, made when first read: a module that only imports this one (the telemetry sources,
    the UI through them) does not pay for aiohttp's import before it makes a request."""
    if name != "REQUEST_ERRORS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import aiohttp

    errors: tuple[type[BaseException], ...] = (aiohttp.ClientError, asyncio.TimeoutError, HttpError)
    globals()["REQUEST_ERRORS"] = errors
    return errors

"""What a client can make our HTTP servers (`serve`, `web`) hold: connections, time, and a JSON body.

- A connection cap: past `max_connections` open connections a new one is answered 503 and closed at once, so
  that hundreds of half-sent requests cannot take every file descriptor.
- A header timeout: a request's line and headers must be in within `header_timeout` seconds of the
  connection opening or of the previous response (aiohttp's idle timer, which closes a connection whose next
  request is not complete; a running handler, an event stream or a WebSocket is not idle).
- A JSON body is read with a size and a nesting bound before it is parsed: a body nested 50 000 deep is a
  400 that says so, never a RecursionError.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from typing import TypedDict

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.lib.jsontypes import JsonValue

log = logging.getLogger(__name__)

DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_HEADER_TIMEOUT_S = 10.0
MAX_JSON_BODY = 1024 * 1024  # aiohttp's own default; a 50 000-deep body (100 kB) reaches the depth check
MAX_JSON_DEPTH = 32
BODY_TIMEOUT_S = 30.0

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


class RunnerKwargs(TypedDict):
    """What ServerLimits sets on aiohttp's web.AppRunner."""

    keepalive_timeout: float


class ServerLimits(BaseModel):
    """The connection bounds of one server (the `--max-connections` and `--header-timeout` options)."""

    model_config = ConfigDict(frozen=True)

    max_connections: int = Field(default=DEFAULT_MAX_CONNECTIONS, ge=1, le=100_000)
    header_timeout: float = Field(default=DEFAULT_HEADER_TIMEOUT_S, gt=0, le=3600)

    def runner_kwargs(self) -> RunnerKwargs:
        """Keywords for web.AppRunner: aiohttp's idle timer is the header timeout."""
        return {"keepalive_timeout": self.header_timeout}


class _Refused(asyncio.Protocol):
    """A connection over the cap: one 503 and the connection is closed."""

    BODY = b"ddtree-tui: too many connections\n"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            + f"Content-Length: {len(self.BODY)}\r\n\r\n".encode()
            + self.BODY
        )
        transport.close()


class LimitedSite(web.BaseSite):
    """A TCP site whose accepted connections are capped (see the module docstring)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        limits: ServerLimits,
        on_refuse: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(runner)
        self._host, self._port, self._limits = host, port, limits
        self._on_refuse = on_refuse  # hears "connections" for each connection refused (metrics)
        self.refused = 0
        self._last_warned = 0.0
        self._handed_out = 0  # handlers made this loop turn, not yet in server.connections

    def _settled(self) -> None:
        self._handed_out -= 1

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    def _protocol(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        assert server is not None
        # The server counts a connection once its handler's connection_made ran, a loop turn after this; a burst
        # of accepts all land in one turn, so the ones handed out since are counted here.
        if len(server.connections) + self._handed_out >= self._limits.max_connections:
            self.refused += 1
            if self._on_refuse is not None:
                self._on_refuse("connections")
            now = time.monotonic()
            if now - self._last_warned > 10.0:  # one line per burst, not one per connection
                self._last_warned = now
                log.warning(
                    "connection limit (%d) reached: new connections answered 503 (%d so far)",
                    self._limits.max_connections,
                    self.refused,
                )
            return _Refused()
        self._handed_out += 1
        asyncio.get_running_loop().call_soon(self._settled)
        return server()

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._protocol, self._host, self._port, reuse_address=True)


def json_depth(data: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (strings skipped), in linear time."""
    depth = deepest = 0
    for m in _BRACKET.finditer(_STRING.sub(b'""', data)):
        if m.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _bad(message: str, too_large: int | None = None) -> web.HTTPException:
    body = json.dumps({"ok": False, "message": message})
    if too_large is not None:
        return web.HTTPRequestEntityTooLarge(
            max_size=too_large, actual_size=-1, text=body, content_type="application/json"
        )
    return web.HTTPBadRequest(text=body, content_type="application/json")


async def read_json_body(
    request: web.Request, *, max_bytes: int = MAX_JSON_BODY, max_depth: int = MAX_JSON_DEPTH
) -> JsonValue:
    """The request's JSON body, read within `max_bytes` and `BODY_TIMEOUT_S` and refused when it nests deeper
    than `max_depth`. Raises an HTTP 400 / 413 whose JSON says what is wrong (a handler lets it propagate)."""
    if request.content_length is not None and request.content_length > max_bytes:
        raise _bad(f"the body is {request.content_length} bytes; at most {max_bytes}", max_bytes)
    data = b""
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            while len(data) <= max_bytes:
                chunk = await request.content.read(max_bytes + 1 - len(data))
                if not chunk:
                    break
                data += chunk
    except TimeoutError:
        raise _bad(f"the body did not arrive within {BODY_TIMEOUT_S:g} s") from None
    if len(data) > max_bytes:
        raise _bad(f"the body is over {max_bytes} bytes", max_bytes)
    depth = json_depth(data)
    if depth > max_depth:
        raise _bad(f"the body nests {depth} deep; at most {max_depth}")
    try:
        value: JsonValue = json.loads(data)
    except (ValueError, RecursionError):
        raise _bad("the body is not JSON") from None
    return value

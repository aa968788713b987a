"""The HTTP side of probing a service: one aiohttp session a manager, and every body read under a cap.

A probe asks `/health`, `/server_info`, `/model_info` and `/metrics` of a server we may not control, through
a port forward, every couple of seconds. Issue 25 found `/server_info` bodies read whole (1.5 GB inside one
5 s probe window), so nothing here reads a body without a cap: a body over its cap is one `BodyTooLarge`
for that request, and the rest of the body is never read (the connection is dropped, not drained).

The session never reads `HTTP_PROXY` and friends (`trust_env=False`): the probes go to loopback or to a
forwarded port, and a proxy would see (and break) them. Keep-alive connections are reused, so a probe every
two seconds rides one connection (one forwarded channel over ssh).
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import aiohttp

__all__ = [
    "MAX_HEALTH_BODY",
    "MAX_INFO_BODY",
    "MAX_METRICS_BODY",
    "BodyTooLarge",
    "get_capped",
    "new_session",
    "why",
]

# The most bytes read of one body. /health answers with a few bytes (SGLang: empty); /server_info and
# /model_info with a JSON object of a few KiB (server_args, internal_states); /metrics with SGLang's
# Prometheus text, which grows with ranks and histogram buckets (hundreds of KiB for a big tp/dp server).
MAX_HEALTH_BODY = 64 * 1024
MAX_INFO_BODY = 2 * 1024 * 1024
MAX_METRICS_BODY = 8 * 1024 * 1024

_CHUNK = 64 * 1024


class BodyTooLarge(Exception):
    """A response body over its cap: that request failed, and nothing past the cap was read."""


def _size(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def new_session() -> aiohttp.ClientSession:
    """A session for one manager's probes: no proxy from the environment, a few kept-alive connections."""
    connector = aiohttp.TCPConnector(limit=16, keepalive_timeout=30)
    return aiohttp.ClientSession(connector=connector, trust_env=False)


async def get_capped(
    session: aiohttp.ClientSession, url: str, *, cap: int, timeout: float
) -> tuple[int, bytes]:
    """GET `url`: its status and body, the body read up to `cap` bytes (decompressed) within `timeout`
    seconds for the whole request.

    BodyTooLarge when the body (or its Content-Length) is over `cap`; aiohttp.ClientError, TimeoutError or
    OSError when the server cannot be reached or does not answer in time."""
    path = urlsplit(url).path or "/"
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False) as r:
        if r.content_length is not None and r.content_length > cap:
            raise BodyTooLarge(
                f"{path} answered with a body of {r.content_length} bytes, over the {_size(cap)} cap; "
                "not read"
            )
        body = bytearray()
        while True:
            chunk = await r.content.read(_CHUNK)
            if not chunk:
                return r.status, bytes(body)
            body += chunk
            if len(body) > cap:
                r.close()  # drop the connection: the rest of the body is never read
                raise BodyTooLarge(f"{path} sent a body over the {_size(cap)} cap; stopped reading it")


def why(e: BaseException) -> str:
    """A failed request in words."""
    if isinstance(e, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "timed out"
    if isinstance(e, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, BodyTooLarge):
        return str(e)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__

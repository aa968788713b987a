"""The tests' HTTP client: the package's one general HTTP library (aiohttp, through `ddtree_tui.lib.http`:
no proxy from the environment, a cap on every body), as one-line calls.

- `get` / `post` / `Client` are blocking: each request runs on a fresh event loop in a worker thread, so a
  synchronous test (or an async test talking to a server in another process) reads like it did with httpx.
- `aget` / `apost` are the same for a coroutine, `AClient` a session of them (a base URL, kept connections);
  `ddtree_tui.lib.http.session()` itself for a stream read as it arrives.
Replies are whole (`Reply`): status, headers, body, `.text`, `.json()`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp

from ddtree_tui.lib import http

ERRORS = http.REQUEST_ERRORS  # what a request that got no answer raises
DROPPED = (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError)  # the server closed mid-answer


@dataclass
class Reply:
    status_code: int
    headers: dict[str, str]
    content: bytes
    cookies: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise AssertionError(f"HTTP {self.status_code}: {self.text[:500]}")


async def arequest(
    method: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
    cookies: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    cap: int = http.BODY_CAP,
) -> Reply:
    hdrs = dict(headers or {})
    if cookies:  # by hand: aiohttp's cookie jar keeps none for an IP address like 127.0.0.1
        hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    async with (
        http.session(headers=hdrs, timeout=timeout) as s,
        s.request(method, url, params=params, json=json_body) as r,
    ):
        body = await http.read_body(r, cap)
        return Reply(r.status, dict(r.headers), body, {k: m.value for k, m in r.cookies.items()})


async def aget(url: str, **kw: Any) -> Reply:
    return await arequest("GET", url, **kw)


async def apost(url: str, json: Any = None, **kw: Any) -> Reply:
    return await arequest("POST", url, json_body=json, **kw)


def _blocking(method: str, url: str, **kw: Any) -> Reply:
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, arequest(method, url, **kw)).result()


def get(url: str, **kw: Any) -> Reply:
    return _blocking("GET", url, **kw)


def post(url: str, json: Any = None, **kw: Any) -> Reply:
    return _blocking("POST", url, json_body=json, **kw)


class Client:
    """Blocking requests that keep the cookies the server sets (a browser's session, for textual-serve)."""

    def __init__(self) -> None:
        self.cookies: dict[str, str] = {}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def get(self, url: str, **kw: Any) -> Reply:
        r = _blocking("GET", url, cookies=self.cookies, **kw)
        self.cookies.update(r.cookies)
        return r


class AClient:
    """`async with AClient(base_url=...) as c: r = await c.get("/path")`: one aiohttp session, whole replies."""

    def __init__(
        self, base_url: str = "", *, timeout: float = 10.0, headers: Mapping[str, str] | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._session = http.session(headers=headers, timeout=timeout)

    async def __aenter__(self) -> AClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        cap: int = http.BODY_CAP,
    ) -> Reply:
        url = self.base_url + path if path.startswith("/") else path
        t = aiohttp.ClientTimeout(total=timeout) if timeout is not None else None
        async with self._session.request(
            method, url, json=json, params=params, headers=headers, timeout=t
        ) as r:
            return Reply(r.status, dict(r.headers), await http.read_body(r, cap))

    async def get(self, path: str, **kw: Any) -> Reply:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, **kw: Any) -> Reply:
        return await self.request("POST", path, **kw)

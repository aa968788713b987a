"""A real HTTP server (aiohttp, loopback) that replays recorded streams byte for byte, with their timing.

Each POST to /generate, /v1/chat/completions or /v1/completions plays the case named by the server's current
`case` (its events: {"t": seconds after the request, "data": the raw SSE text}); a case without a
`data: [DONE]` event just ends the stream, as some OpenAI-compatible servers do. `status`/`body` make a
refused request. GET /v1/models lists `models`. Every request body is kept in `requests`.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from aiohttp import web

FIXTURES = Path(__file__).parent / "fixtures"


def sglang_cases(version: str = "0.5.23") -> dict[str, dict[str, Any]]:
    data = json.loads((FIXTURES / "sglang" / version / "streams.json").read_text(encoding="utf-8"))
    return {c["name"]: c for c in data["cases"]}


def openai_compat_cases() -> dict[str, dict[str, Any]]:
    data = json.loads((FIXTURES / "openai_compat" / "streams.json").read_text(encoding="utf-8"))
    return {c["name"]: c for c in data["cases"]}


class ReplayServer:
    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self.case: dict[str, Any] | None = None
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.models: list[str] = ["default"]
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ReplayServer:
        app = web.Application()
        for path in ("/generate", "/v1/chat/completions", "/v1/completions"):
            app.router.add_post(path, self._stream)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
        )

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append((request.path, body))
        case = self.case or {}
        if case.get("status"):
            return web.Response(
                status=case["status"], text=case.get("body", ""), content_type="application/json"
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        t0 = time.monotonic()
        for ev in case.get("events", []):
            wait = ev["t"] * self.scale - (time.monotonic() - t0)
            if wait > 0:
                await asyncio.sleep(wait)
            await resp.write(ev["data"].encode())
        await resp.write_eof()
        return resp

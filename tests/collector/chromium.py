"""Headless Chromium driven over the DevTools protocol (a websocket), for the browser-view test: load a page,
collect what the page's own websockets receive, take a screenshot."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.procs import stop_child

CHROMIUM = shutil.which("chromium")
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_].*?\x1b\\|\x1b.")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


class Chromium:
    def __init__(self, workdir: Path) -> None:
        if CHROMIUM is None:
            raise AssertionError("chromium is not installed: run scripts/test, which installs it")
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = open(self.dir / "chromium.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.dir / 'profile'}",
                "--window-size=1500,1000",
                "about:blank",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.port = self._devtools_port(30)
        self._id = 0
        self.ws_text: list[str] = []  # decoded payloads the page's websockets received
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiters: dict[int, asyncio.Future[Any]] = {}

    def _devtools_port(self, timeout: float) -> int:
        f = self.dir / "profile" / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"chromium exited ({self.proc.returncode}): {self.tail()}")
            if f.exists() and f.read_text().strip():
                return int(f.read_text().split()[0])
            time.sleep(0.2)
        raise AssertionError(f"chromium opened no DevTools port within {timeout:g} s: {self.tail()}")

    def tail(self) -> str:
        return (self.dir / "chromium.log").read_text(errors="replace")[-2000:]

    async def connect(self) -> None:
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{self.port}/json/list") as r:
            targets = await r.json()
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.call("Network.enable")
        await self.call("Page.enable")

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._waiters:
                self._waiters.pop(data["id"]).set_result(data)
            elif data.get("method") == "Network.webSocketFrameReceived":
                resp = data["params"]["response"]
                payload = resp.get("payloadData", "")
                if resp.get("opcode") == 2:
                    with contextlib.suppress(ValueError):
                        payload = base64.b64decode(payload).decode("utf-8", "replace")
                self.ws_text.append(payload)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        self._id += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[self._id] = fut
        await self._ws.send_str(json.dumps({"id": self._id, "method": method, "params": params}))
        async with asyncio.timeout(20):
            res: dict[str, Any] = await fut
        if "error" in res:
            raise AssertionError(f"{method}: {res['error']}")
        return res.get("result", {})

    def screen_text(self) -> str:
        return strip_ansi("".join(self.ws_text))

    async def screenshot(self, path: Path) -> int:
        res = await self.call("Page.captureScreenshot", format="png")
        data = base64.b64decode(res["data"])
        await asyncio.to_thread(path.write_bytes, data)
        return len(data)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        stop_child(self.proc)
        self.log.close()

"""`ddtree-tui web`: the TUI through textual-serve, attached to a real collector, loaded in headless Chromium;
the page receives the fleet's screen and the collector sees the tab's TUI attach to it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ddtree_tui.cli import main
from tests import httpc
from tests.collector.chromium import Chromium
from tests.collector.conftest import ServeProc
from tests.collector.prom import wait_http
from tests.util import free_port

ROOT = Path(__file__).resolve().parents[2]


def start_web(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "web.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ddtree_tui.cli", "web", *args],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    return proc, log


def _event_clients(url: str) -> float:
    for line in httpc.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith("ddtree_collector_event_clients "):
            return float(line.split()[1])
    return -1.0


@pytest.mark.browser
@pytest.mark.timeout(180)
async def test_browser_shows_the_fleet_through_the_collector(
    tmp_path: Path, serve_demo: Callable[..., ServeProc]
) -> None:
    srv = await asyncio.to_thread(serve_demo)
    port = free_port()
    web, log = await asyncio.to_thread(
        start_web, tmp_path, "--listen", f"127.0.0.1:{port}", "--attach", srv.url
    )
    chrome: Chromium | None = None
    try:
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/", 30, "ddtree-tui web", web)
        assert _event_clients(srv.url) == 0.0
        chrome = await asyncio.to_thread(Chromium, tmp_path / "chromium")
        await chrome.connect()
        await chrome.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
        deadline = time.monotonic() + 60
        want = ("ATTACHED to", "local:0", "local/dflash")
        while time.monotonic() < deadline and not all(w in chrome.screen_text() for w in want):
            await asyncio.sleep(0.5)
        text = chrome.screen_text()
        assert all(w in text for w in want), (
            f"the page got: {text[-3000:]!r}\nweb log: {log.read_text()[-2000:]}"
        )
        assert await asyncio.to_thread(_event_clients, srv.url) == 1.0  # the tab's TUI follows the collector
        assert await chrome.screenshot(tmp_path / "web.png") > 10_000  # a rendered page, kept for a person
    finally:
        if chrome is not None:
            await chrome.close()
        web.terminate()
        web.wait(20)


def test_web_refuses_a_public_listen_without_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "--listen", "0.0.0.0:8765"]) == 2
    assert "not a loopback address" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_web_token_guard(tmp_path: Path) -> None:
    port = free_port()
    tf = tmp_path / "web.token"
    web, log = start_web(tmp_path, "--listen", f"127.0.0.1:{port}", "--token-file", str(tf))
    try:
        deadline = time.monotonic() + 30
        while not tf.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        token = tf.read_text().strip()
        wait_http(f"http://127.0.0.1:{port}/?token={token}", 30, "ddtree-tui web", web)
        assert httpc.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 401
        assert httpc.get(f"http://127.0.0.1:{port}/?token=nope", timeout=5).status_code == 401
        with httpc.Client() as c:
            r = c.get(f"http://127.0.0.1:{port}/?token={token}", timeout=5)
            assert r.status_code == 200 and "textual" in r.text.lower()
            assert (
                c.get(f"http://127.0.0.1:{port}/static/css/xterm.css", timeout=5).status_code == 200
            )  # cookie
        assert token not in log.read_text()
    finally:
        web.terminate()
        web.wait(20)

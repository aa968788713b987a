"""Open a report in a real headless Chromium and check it: every request the page makes (from the DevTools
protocol's network log), Content-Security-Policy violations and console errors, the charts that rendered
(present, with drawn marks and a non-zero size), and a PNG screenshot.

`python -m ddtree_tui.report.browser REPORT.html [--screenshot FILE.png]` prints the check as JSON and exits
0 when the page is self-contained with every chart drawn, 1 otherwise, 2 without a browser.

A small DevTools client over aiohttp's WebSocket (already a dependency): no Selenium, no Node. The browser
runs with a throwaway profile and every network feature it would use on its own (updates, sync, field
trials) off; it listens for DevTools on 127.0.0.1 only.

`check_page` starts a browser for one page; `Browser` keeps one running for several (a test module's pages:
the start is most of a check's cost) and checks each page in a browser context of its own, an incognito-like
profile created for that page and disposed after it, so no cache, cookie or storage of one check reaches
the next: each page is seen as a freshly started browser would see it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    import aiohttp

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

FLAGS = (
    "--headless=new",
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--hide-scrollbars",
    "--mute-audio",
)

# what the page reports about itself once loaded
PROBE = """(() => {
  const figs = Array.from(document.querySelectorAll('figure.chart'));
  const charts = figs.map(f => {
    const svg = f.querySelector('svg');
    const r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const marks = svg ? svg.querySelectorAll('path, rect, line, polyline, use').length : 0;
    const texts = svg ? svg.querySelectorAll('text').length : 0;
    return {id: f.id, width: r.width, height: r.height, marks: marks, texts: texts,
            title: (f.querySelector('figcaption b') || {}).textContent || ''};
  });
  return {title: document.title, charts: charts, declared: Number(document.body.dataset.charts || -1),
          csp: (document.querySelector('meta[http-equiv="Content-Security-Policy"]') || {}).content || null,
          text: document.body.innerText.length,
          height: document.documentElement.scrollHeight};
})()"""


class ChartCheck(BaseModel):
    id: str
    title: str
    width: float
    height: float
    marks: int
    texts: int

    @property
    def drawn(self) -> bool:
        return self.width > 50 and self.height > 50 and self.marks > 5 and self.texts > 0


class PageCheck(BaseModel):
    """What a browser saw of one page."""

    url: str
    title: str = ""
    csp: str | None = None
    requests: list[str] = Field(default_factory=list)  # every URL the page asked for, the page included
    outside: list[str] = Field(default_factory=list)  # those that are not the file itself or data:
    violations: list[str] = Field(default_factory=list)  # CSP violations and blocked loads the browser logged
    console_errors: list[str] = Field(default_factory=list)
    charts: list[ChartCheck] = Field(default_factory=list)
    declared_charts: int = -1
    text_chars: int = 0
    screenshot: str | None = None

    @property
    def self_contained(self) -> bool:
        return not self.outside and not self.violations

    @property
    def charts_ok(self) -> bool:
        return (
            bool(self.charts)
            and self.declared_charts == len(self.charts)
            and all(c.drawn for c in self.charts)
        )

    @property
    def ok(self) -> bool:
        return self.self_contained and self.charts_ok and not self.console_errors


class BrowserMissing(RuntimeError):
    pass


def find_browser() -> str:
    env = os.environ.get("DDTREE_CHROMIUM")
    if env:
        return env
    for name in BROWSERS:
        p = shutil.which(name)
        if p:
            return p
    raise BrowserMissing("no Chromium found (apt-get install chromium, or set DDTREE_CHROMIUM)")


class _Cdp:
    """Just enough of the DevTools protocol: commands with ids, events collected in order."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.waiters: list[tuple[str, asyncio.Future[dict[str, Any]]]] = []
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self.pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(data)
            else:
                self.events.append(data)
                for name, fut in list(self.waiters):
                    if name == data.get("method") and not fut.done():
                        fut.set_result(data)

    async def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
        self.next_id += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        async with asyncio.timeout(timeout):
            data = await fut
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})

    def expect(self, method: str) -> asyncio.Future[dict[str, Any]]:
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiters.append((method, fut))
        return fut


def _devtools_port(profile: Path, proc: subprocess.Popen[bytes], timeout: float) -> int:
    f = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the browser exited ({proc.returncode}) before it listened")
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(f.read_text().split()[0])
        time.sleep(0.05)
    raise RuntimeError(f"the browser did not listen within {timeout:g} s")


async def _check(
    port: int, url: str, screenshot: bool, width: int, timeout: float
) -> tuple[PageCheck, bytes | None]:
    """The page checked in a tab of a browser context of its own (made here, disposed after)."""
    import aiohttp

    async with aiohttp.ClientSession(trust_env=False) as http:
        async with http.get(f"http://127.0.0.1:{port}/json/version") as r:
            version = await r.json(content_type=None)
        async with http.ws_connect(version["webSocketDebuggerUrl"], max_msg_size=0) as bws:
            browser = _Cdp(bws)
            try:
                ctx = (await browser.send("Target.createBrowserContext"))["browserContextId"]
                try:
                    made = await browser.send(
                        "Target.createTarget", {"url": "about:blank", "browserContextId": ctx}
                    )
                    page_ws = f"ws://127.0.0.1:{port}/devtools/page/{made['targetId']}"
                    return await _check_tab(http, page_ws, url, screenshot, width, timeout)
                finally:
                    with contextlib.suppress(Exception):  # closes its tabs too
                        await browser.send("Target.disposeBrowserContext", {"browserContextId": ctx}, 10.0)
            finally:
                browser.reader.cancel()


async def _check_tab(
    http: aiohttp.ClientSession, page_ws: str, url: str, screenshot: bool, width: int, timeout: float
) -> tuple[PageCheck, bytes | None]:
    """Load `url` in the tab whose DevTools socket is `page_ws` and collect what it did."""
    png: bytes | None = None
    async with http.ws_connect(page_ws, max_msg_size=0) as ws:
        cdp = _Cdp(ws)
        try:
            for m in ("Network.enable", "Page.enable", "Log.enable", "Runtime.enable", "Audits.enable"):
                await cdp.send(m)
            await cdp.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            )
            loaded = cdp.expect("Page.loadEventFired")
            await cdp.send("Page.navigate", {"url": url})
            async with asyncio.timeout(timeout):
                await loaded
            await asyncio.sleep(0.3)  # late events (a lazy image, a CSP report) arrive after load
            probe = await cdp.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True})
            info = probe["result"]["value"]
            if screenshot:
                h = min(int(info["height"]), 16000)
                res = await cdp.send(
                    "Page.captureScreenshot",
                    {
                        "format": "png",
                        "captureBeyondViewport": True,
                        "clip": {"x": 0, "y": 0, "width": width, "height": h, "scale": 1},
                    },
                    timeout=60.0,
                )
                png = base64.b64decode(res["data"])
        finally:
            cdp.reader.cancel()
    check = PageCheck(
        url=url,
        title=info["title"],
        csp=info["csp"],
        charts=[ChartCheck.model_validate(c) for c in info["charts"]],
        declared_charts=int(info["declared"]),
        text_chars=int(info["text"]),
    )
    for ev in cdp.events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Network.requestWillBeSent":
            u = p["request"]["url"]
            check.requests.append(u)
            if u != url and not u.startswith("data:"):
                check.outside.append(u)
        elif method == "Network.loadingFailed" and p.get("blockedReason"):
            check.violations.append(f"blocked ({p['blockedReason']})")
        elif method == "Log.entryAdded":
            entry = p.get("entry", {})
            text = entry.get("text", "")
            if "Content Security Policy" in text or entry.get("source") == "security":
                check.violations.append(text)
            elif entry.get("level") == "error":
                check.console_errors.append(text)
        elif method == "Runtime.consoleAPICalled" and p.get("type") == "error":
            check.console_errors.append(" ".join(str(a.get("value", "")) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            check.console_errors.append(str(p.get("exceptionDetails", {}).get("text", "exception")))
        elif method == "Audits.issueAdded":
            issue = p.get("issue", {})
            if issue.get("code") == "ContentSecurityPolicyIssue":
                d = issue.get("details", {}).get("contentSecurityPolicyIssueDetails", {})
                check.violations.append(
                    f"CSP: {d.get('violatedDirective', '?')} blocked {d.get('blockedURL', 'inline content')}"
                )
    return check, png


class Browser:
    """One headless Chromium kept running for several page checks (`with Browser() as b: b.check(page)`): each
    page in a browser context of its own, disposed after it (see the module docstring); the browser and its
    throwaway profile go when the `with` ends."""

    def __init__(self, width: int = 1200, timeout: float = 60.0) -> None:
        self.width, self.timeout = width, timeout
        self._prof: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0

    def __enter__(self) -> Browser:
        exe = find_browser()
        self._prof = tempfile.TemporaryDirectory(prefix="ddtree-chromium-")
        try:
            argv = [exe, *FLAGS, f"--user-data-dir={self._prof.name}", f"--window-size={self.width},900"]
            if os.geteuid() == 0:
                argv.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
            argv.append("about:blank")
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._port = _devtools_port(Path(self._prof.name), self._proc, self.timeout)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the browser (its whole process group, which it leads) and remove its profile."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self._prof is not None:
            self._prof.cleanup()
            self._prof = None

    def check(
        self, path: Path | str, screenshot: Path | str | None = None, width: int | None = None
    ) -> PageCheck:
        """Load `path` (a local HTML file) in a fresh browser context and report what it did (PageCheck)."""
        if self._proc is None:
            raise RuntimeError("the browser is not running (use `with Browser() as b`)")
        url = Path(path).resolve().as_uri()
        w = width or self.width
        check, png = asyncio.run(_check(self._port, url, screenshot is not None, w, self.timeout))
        if screenshot is not None and png is not None:
            shot = Path(screenshot)
            shot.parent.mkdir(parents=True, exist_ok=True)
            shot.write_bytes(png)
            check.screenshot = str(shot)
        return check


def check_page(
    path: Path | str,
    screenshot: Path | str | None = None,
    width: int = 1200,
    timeout: float = 60.0,
    browser: Browser | None = None,
) -> PageCheck:
    """Load `path` (a local HTML file) in headless Chromium and report what it did (see PageCheck): in
    `browser` when given (one already running), else in one started for this page."""
    if browser is not None:
        return browser.check(path, screenshot, width)
    with Browser(width, timeout) as b:
        return b.check(path, screenshot)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ddtree_tui.report.browser", description=__doc__)
    ap.add_argument("report", help="an HTML report")
    ap.add_argument("--screenshot", metavar="FILE.png")
    ap.add_argument("--width", type=int, default=1200)
    ns = ap.parse_args(argv)
    if not Path(ns.report).is_file():
        print(f"{ns.report}: no such file", file=sys.stderr)
        return 2
    try:
        c = check_page(ns.report, ns.screenshot, ns.width)
    except BrowserMissing as e:
        print(str(e), file=sys.stderr)
        return 2
    out = c.model_dump()
    out.update(self_contained=c.self_contained, charts_ok=c.charts_ok, ok=c.ok)
    print(json.dumps(out, indent=2))
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Every body a probe reads is capped (issue 24, after issue 25 found 1.5 GB `/server_info` bodies read whole):
a server on a real loopback socket that streams an endless `/server_info`, `/metrics` or `/health`, or
announces a huge Content-Length, gets a clear per-request error quickly, the connection is dropped rather
than drained, and the manager goes on probing. The probes never go through HTTP_PROXY."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.services.health import fetch_server_info, probe_health
from ddtree_tui.services.probehttp import MAX_INFO_BODY, BodyTooLarge, get_capped, new_session
from ddtree_tui.services.sglang_metrics import fetch_sglang_metrics
from tests.fixtures.services.support import local_manager, profile_toml, service_workdir
from tests.util import free_port

pytestmark = pytest.mark.timeout(60)

workdir = pytest.fixture(name="workdir")(service_workdir)

SLOW = 45.0  # every request's timeout here: a cap that did not work would only end at this timeout


class Hostile:
    """A loopback HTTP/1.1 server: `/health` answers "ok" (or streams forever when `endless_health`),
    `/server_info` and `/metrics` stream a body that never ends, `/huge` announces 10 GB and sends 1 KiB;
    anything else is 404. It counts requests, and the endless bodies the client hung up on."""

    def __init__(self, *, endless_health: bool = False) -> None:
        self.endless_health = endless_health
        self.hits: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()  # endless bodies that ended because the client hung up
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self.port = 0

    async def __aenter__(self) -> Hostile:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for t in list(self._conns):
            t.cancel()
        for t in list(self._conns):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)  # type: ignore[arg-type]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                self.hits[path] += 1
                if path == "/health" and not self.endless_health:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()
                elif path in ("/health", "/server_info", "/metrics"):
                    await self._endless(path, writer)
                    return
                elif path == "/huge":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n" + b"x" * 1024)
                    await writer.drain()
                    await reader.read()  # until the client hangs up
                    self.dropped[path] += 1
                    return
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the server is closing (a cancelled handler would be logged as an error)
        finally:
            writer.close()
            self._conns.discard(task)  # type: ignore[arg-type]

    async def _endless(self, path: str, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (65536, b"7" * 65536)
        try:
            while True:
                writer.write(chunk)
                await writer.drain()
        except ConnectionError:
            self.dropped[path] += 1


async def test_endless_server_info_fails_the_read_with_the_cap_and_the_manager_keeps_probing(
    workdir: Path,
) -> None:
    async with Hostile() as srv:
        services = (
            f'[[service]]\nname = "ext"\nalgorithm = "dflash"\nlauncher = "external"\nport = {srv.port}\n'
        )
        prof = parse_profile(profile_toml("loc", "local", workdir, services))
        m, _ = await local_manager(prof)  # its probes time out after 2 s: without a cap, no "cap" error
        try:
            await m.start()
            async with asyncio.timeout(20):
                while "cap" not in (m.status("ext").detail or ""):
                    await asyncio.sleep(0.05)
            st = m.status("ext")
            assert st.state == "ready", st
            assert st.detail is not None and "/server_info" in st.detail and "2 MiB cap" in st.detail, st
            async with asyncio.timeout(20):  # the endless body was dropped, not drained
                while srv.dropped["/server_info"] == 0:
                    await asyncio.sleep(0.05)
            seen = srv.hits["/health"]
            async with asyncio.timeout(20):  # and the probing goes on
                while srv.hits["/health"] < seen + 3:
                    await asyncio.sleep(0.05)
            assert m.status("ext").state == "ready"
            k = await m.kill("ext")
            assert not k.ok and "does not stop it" in k.message
        finally:
            await m.stop()


async def test_each_probe_read_is_capped_and_fails_on_its_own() -> None:
    async with Hostile(endless_health=True) as srv, new_session() as http:
        base = f"http://127.0.0.1:{srv.port}"
        async with asyncio.timeout(20):
            h = await probe_health(http, base, SLOW)
            assert not h.ok and h.error is not None and "/health" in h.error and "64 KiB cap" in h.error
            with pytest.raises(BodyTooLarge, match=r"/metrics sent a body over the 8 MiB cap"):
                await fetch_sglang_metrics(http, base, SLOW)
            with pytest.raises(BodyTooLarge, match=r"/server_info sent a body over the 2 MiB cap"):
                await fetch_server_info(http, base, SLOW)
            # a Content-Length over the cap is refused before reading: the server sent 1 KiB and waits
            with pytest.raises(BodyTooLarge, match=r"/huge answered with a body of 10000000000 bytes"):
                await get_capped(http, f"{base}/huge", cap=MAX_INFO_BODY, timeout=SLOW)
            while srv.dropped["/huge"] == 0:
                await asyncio.sleep(0.05)


async def test_probes_never_go_through_a_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # a proxy nobody listens on: using it would fail the probe
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with Hostile() as srv, new_session() as http:
        h = await probe_health(http, f"http://127.0.0.1:{srv.port}", 10)
        assert h.ok, h

"""The collector's and the web view's guards: loopback by default, a token for anything else, the token never
printed; the Host/Origin checks, the connection and body limits, bounded recordings, SIGHUP (issue 25), each
through real sockets, real child processes and real signals."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import httpx
import psutil
import pytest

from ddtree_tui.cli import main
from ddtree_tui.collector.hostcheck import AccessPolicy, HostSpecError
from ddtree_tui.collector.recording import RecordingError, read_records
from ddtree_tui.collector.server import ListenError, load_or_create_token, parse_listen
from tests import httpc
from tests.collector.conftest import ServeProc
from tests.collector.prom import wait_http
from tests.procs import alive, stop_child
from tests.util import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_non_loopback_listen_without_token_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--demo", "--listen", "0.0.0.0:9464"]) == 2
    err = capsys.readouterr().err
    assert "not a loopback address" in err and "--token-file" in err


@pytest.mark.parametrize("bad", ["9464", "127.0.0.1:http", "[::1]9464", ":9464", "127.0.0.1:70000"])
def test_bad_listen_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ListenError, match="--listen"):
        parse_listen(bad)


def test_listen_forms() -> None:
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:9000") == ("::1", 9000)


def test_token_file_is_created_0600_and_a_readable_one_refused(tmp_path: Path) -> None:
    p = tmp_path / "t" / "collector.token"
    tok, created = load_or_create_token(p)
    assert created and len(tok) >= 32
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert load_or_create_token(p) == (tok, False)
    p.chmod(0o644)
    with pytest.raises(ListenError, match="readable by others"):
        load_or_create_token(p)


# --- issue 25: who may talk to `web` and `serve`, and what a client can make them hold ------------------------


def _start_web(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
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


def _descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True) if alive(p)}
    except psutil.NoSuchProcess:
        return set()


async def _ws_status(url: str, origin: str) -> int:
    """The status of a real WebSocket handshake to `url` with this Origin (101 when it was accepted; the
    socket is closed again at once)."""
    async with aiohttp.ClientSession() as s:
        try:
            ws = await s.ws_connect(
                url, headers={"Origin": origin}, timeout=aiohttp.ClientWSTimeout(ws_close=5)
            )
        except aiohttp.WSServerHandshakeError as e:
            return e.status
        await ws.close()
        return 101


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_web_refuses_a_cross_origin_websocket_and_starts_nothing(tmp_path: Path) -> None:
    port = free_port()
    web, log = await asyncio.to_thread(
        _start_web, tmp_path, "--listen", f"127.0.0.1:{port}", "--attach", f"http://127.0.0.1:{free_port()}"
    )
    ws_url = f"ws://127.0.0.1:{port}/ws"
    try:
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/", 30, "ddtree-tui web", web)
        before = _descendants(web.pid)
        for _ in range(3):
            assert await _ws_status(ws_url, "http://evil.example") == 403
        assert await _ws_status(ws_url, "null") == 403  # a sandboxed frame, a file:// page
        # DNS rebinding: the page's own name in Host
        async with httpx.AsyncClient() as c:
            r = await c.get(f"http://127.0.0.1:{port}/", headers={"Host": f"evil.example:{port}"})
            assert r.status_code == 403
        await asyncio.sleep(1.0)  # a process started by a handshake would be there by now
        assert _descendants(web.pid) == before, "a refused handshake started a process"
        text = log.read_text()
        assert "refused GET '/ws'" in text and "evil.example" in text

        # the page's own origin (and its localhost alias) still gets a TUI
        async with aiohttp.ClientSession() as s:
            async with s.ws_connect(ws_url, headers={"Origin": f"http://localhost:{port}"}) as ws:
                msg = await asyncio.wait_for(ws.receive(), 60)
                assert msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), msg
                assert _descendants(web.pid) - before, "no TUI process for an accepted handshake"
        deadline = time.monotonic() + 30
        while _descendants(web.pid) - before and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
    finally:
        await asyncio.to_thread(stop_child, web, 20)


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_token_guards_every_route_but_the_probes_and_serve_refuses_a_rebinding_host_and_a_foreign_origin(
    tmp_path: Path, serve_demo: Callable[..., ServeProc]
) -> None:
    """Two checks of one `serve --demo --token-file` (each started its own): the token, then Host/Origin."""
    tf = tmp_path / "collector.token"
    srv = serve_demo("--token-file", str(tf), "--allow-host", "collector.lan:9999")
    token = tf.read_text().strip()
    assert token not in srv.log.read_text()  # only the path is printed
    assert "written to" in srv.log.read_text()
    assert httpc.get(f"{srv.url}/metrics", timeout=5).status_code == 401
    assert (
        httpc.get(f"{srv.url}/snapshot", headers={"Authorization": "Bearer wrong"}, timeout=5).status_code
        == 401
    )
    ok = httpc.get(f"{srv.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert ok.status_code == 200 and "ddtree_up 1.0" in ok.text
    assert httpx.get(f"{srv.url}/-/healthy", timeout=5).status_code == 200
    # who may talk to it (issue 25): the Host and Origin checks
    auth = {"Authorization": f"Bearer {token}"}
    paths = ["/snapshot", "/logs?ref=local/dflash", "/metrics", "/alerts", "/events"]
    with httpx.Client(timeout=5, headers=auth) as c:

        def status(path: str, **headers: str) -> int:
            with c.stream("GET", f"{srv.url}{path}", headers=headers) as r:
                return r.status_code

        for path in paths:
            assert status(path, Host="evil.example") == 403, path
            assert status(path, Host=f"evil.example:{srv.port}") == 403, path
            assert status(path, Origin="http://evil.example") == 403, path
            assert status(path) == 200, path  # Host 127.0.0.1:PORT, as Prometheus sends it
        assert status("/snapshot", Host=f"localhost:{srv.port}") == 200
        assert status("/snapshot", Host=f"[::1]:{srv.port}") == 200
        assert status("/snapshot", Host="127.0.0.1:1") == 403  # the right name, another port
        assert status("/snapshot", Host="collector.lan:9999") == 200  # --allow-host
        assert status("/snapshot", Origin=f"http://127.0.0.1:{srv.port}") == 200
        metrics = c.get(f"{srv.url}/metrics").text
        assert f'ddtree_collector_refused_total{{reason="host"}} {2 * len(paths) + 1}.0' in metrics
        assert f'ddtree_collector_refused_total{{reason="origin"}} {len(paths)}.0' in metrics
    text = srv.log.read_text()
    assert "refused GET '/snapshot'" in text and "evil.example" in text
    assert token not in text


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_serve_drops_half_sent_requests_caps_connections_and_stops_cleanly_on_sighup(
    serve_demo: Callable[..., ServeProc],
) -> None:
    """Two checks of one `serve --demo` (each started its own): the limits, then SIGHUP."""
    srv = serve_demo("--max-connections", "20", "--header-timeout", "2")
    socks = []
    try:
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(f"GET /snapshot HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n".encode())  # and no more
            socks.append(s)
        answers = []
        for s in socks:
            s.settimeout(60)  # generous: every one is answered or closed well before (2 s header timeout)
            got = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := s.recv(4096):
                    got += chunk
            answers.append(got)
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
        dropped = [a for a in answers if a == b""]
        assert len(refused) >= 15, answers  # over the cap of 20: answered 503 at once
        assert len(refused) + len(dropped) == 40, answers  # the rest closed by the header timeout
    finally:
        for s in socks:
            s.close()
    assert httpx.get(f"{srv.url}/snapshot", timeout=5).status_code == 200  # and the collector serves on
    assert "connection limit (20) reached" in srv.log.read_text()
    metrics = httpx.get(f"{srv.url}/metrics", timeout=5).text
    line = next(
        x
        for x in metrics.splitlines()
        if x.startswith('ddtree_collector_refused_total{reason="connections"}')
    )
    assert len(refused) <= float(line.split()[-1]) <= 40  # a 503 can be lost to the reset that follows it
    # SIGHUP: a clean stop, and nothing it started left running
    kids = _descendants(srv.proc.pid)
    srv.proc.send_signal(signal.SIGHUP)
    assert srv.proc.wait(60) == 0  # a clean stop, not death by SIGHUP (-1)
    deadline = time.monotonic() + 20
    while (left := {k for k in kids if alive(k)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"left running after SIGHUP: {left}"
    assert "Traceback" not in srv.log.read_text()


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_a_deep_or_huge_intent_body_is_a_clear_4xx(
    tmp_path: Path, serve_demo: Callable[..., ServeProc]
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    srv = serve_demo("--intents", cwd=work)
    token = (work / ".ddtree" / "collector.token").read_text().strip()
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    deep = "[" * 50_000 + "]" * 50_000
    r = httpx.post(f"{srv.url}/intents/launch", content=deep, headers=auth, timeout=10)
    assert r.status_code == 400 and "nests 50000 deep" in r.json()["message"], r.text
    huge = json.dumps({"ref": "local/dflash", "pad": "x" * 2_000_000})
    r = httpx.post(f"{srv.url}/intents/launch", content=huge, headers=auth, timeout=10)
    assert r.status_code == 413 and "at most 1048576" in r.json()["message"], r.text
    r = httpx.post(f"{srv.url}/intents/launch", content=b"{not json", headers=auth, timeout=10)
    assert r.status_code == 400 and "not JSON" in r.json()["message"]
    r = httpx.post(f"{srv.url}/intents/launch", content=b'{"ref": "nohost/nosvc"}', headers=auth, timeout=10)
    assert r.status_code == 400 and "nohost" in r.json()["message"]  # a body within bounds is still read
    assert "Traceback" not in srv.log.read_text()


def _recording(path: Path, *lines: bytes) -> Path:
    head = json.dumps({"type": "header", "version": 1, "started": 0.0, "max_bytes": 1}).encode() + b"\n"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(head)
        for line in lines:
            f.write(line)
    return path


@pytest.mark.slow
def test_a_gzip_bomb_recording_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 20 MiB of one line in a few KiB of gzip: refused at 16 MiB, never read whole
    bomb = _recording(
        tmp_path / "bomb.jsonl.gz", b'{"type":"event","t":1,"ev":"' + b"A" * (20 << 20) + b'"}\n'
    )
    assert bomb.stat().st_size < 200_000
    assert main(["serve", "--replay", str(bomb)]) == 2
    assert "a line longer than 16 MiB" in capsys.readouterr().err
    assert main(["--replay", str(bomb)]) == 2
    assert "a line longer than 16 MiB" in capsys.readouterr().err
    # many short, valid lines: the unpacked total and the record count are bounded as well
    ev = b'{"type":"event","t":1,"ev":{"kind":"notice","severity":"information","text":"x"}}\n'
    many = _recording(tmp_path / "many.jsonl.gz", ev * 40_000)
    with pytest.raises(RecordingError, match="unpacks to more than 1 MiB"):
        list(read_records(many, max_total=1 << 20))
    with pytest.raises(RecordingError, match="more than 1000 records"):
        list(read_records(many, max_records=1000))
    assert len(list(read_records(many))) == 40_001  # within the defaults it plays


def test_access_policy_names() -> None:
    """The rules the two servers apply, one case each (the socket tests above show they are applied)."""
    lo = AccessPolicy(
        "127.0.0.1", 9464, allow_hosts=["fwd.lan", "box:19464"], allow_origins=["https://app:3000"]
    )
    assert all(
        lo.host_ok(h) for h in ("127.0.0.1:9464", "LOCALHOST:9464", "[::1]:9464", "fwd.lan:1", "box:19464")
    )
    assert not any(lo.host_ok(h) for h in ("evil.example:9464", "127.0.0.1", "box:9464", "a b:9464", "[::1"))
    assert lo.origin_ok("http://localhost:9464") and lo.origin_ok("https://app:3000/")
    assert not any(lo.origin_ok(o) for o in ("null", "http://evil.example:9464", "http://x@127.0.0.1:9464"))
    v6 = AccessPolicy("::1", 0)
    v6.bind(8765)  # port 0: the one the system chose
    assert v6.host_ok("[::1]:8765") and not v6.host_ok("[::1]:0")
    anywhere = AccessPolicy("0.0.0.0", 9464)
    assert anywhere.host_ok("10.1.2.3:9464") and anywhere.host_ok("[fe80::1]:9464")  # an IP cannot be rebound
    assert not anywhere.host_ok("evil.example:9464")
    # but a page on some other address is not this server: its Origin must be the request's own Host
    assert anywhere.refusal("10.1.2.3:9464", "http://10.1.2.3:9464") is None
    assert anywhere.refusal("10.1.2.3:9464", "http://10.6.6.6:9464") is not None
    with pytest.raises(HostSpecError, match="--allow-host 'a/b'"):
        AccessPolicy("127.0.0.1", 1, allow_hosts=["a/b"])
    with pytest.raises(HostSpecError, match="--allow-origin 'evil'"):
        AccessPolicy("127.0.0.1", 1, allow_origins=["evil"])

"""lib/http.py against a real loopback server: bodies over the cap are a clear error (with and without a
Content-Length), lines over the cap too, and the proxy environment is never used."""

from __future__ import annotations

import http.server

import pytest

from ddtree_tui.lib import http as lhttp
from tests.util import serve_http


class _Bodies(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        size = int(self.path.split("/")[-1])
        body = (b"x" * 99 + b"\n") * (size // 100)
        self.send_response(200)
        if self.path.startswith("/chunked/"):  # no Content-Length: the cap is counted while reading
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 1000):
                part = body[i : i + 1000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        pass


@pytest.fixture
def port() -> object:
    with serve_http(_Bodies) as p:
        yield p


@pytest.mark.parametrize("kind", ["sized", "chunked"])
async def test_a_body_over_the_cap_is_a_clear_error(port: int, kind: str) -> None:
    async with lhttp.session(timeout=5) as s:
        async with s.get(f"http://127.0.0.1:{port}/{kind}/5000") as r:
            assert len(await lhttp.read_body(r, cap=5000)) == 5000  # at the cap: read whole
        async with s.get(f"http://127.0.0.1:{port}/{kind}/5000") as r:
            with pytest.raises(lhttp.BodyTooLarge, match=r"over the 4999 byte cap") as e:
                await lhttp.read_body(r, cap=4999)
        assert f"127.0.0.1:{port}/{kind}/5000" in str(e.value)


async def test_lines_are_capped_one_by_one(port: int) -> None:
    async with lhttp.session(timeout=5) as s:
        async with s.get(f"http://127.0.0.1:{port}/chunked/3000") as r:
            lines = [ln async for ln in lhttp.iter_lines(r, cap=100)]
        assert lines == ["x" * 99] * 30
        async with s.get(f"http://127.0.0.1:{port}/chunked/3000") as r:
            with pytest.raises(lhttp.BodyTooLarge, match="a line over the 50 byte cap"):
                _ = [ln async for ln in lhttp.iter_lines(r, cap=50)]


async def test_the_proxy_environment_is_not_used(port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy that does not exist would fail every request that went through it."""
    dead = "http://127.0.0.1:9"  # discard port: nothing listens there
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with lhttp.session(timeout=5) as s, s.get(f"http://127.0.0.1:{port}/sized/100") as r:
        assert r.status == 200 and len(await lhttp.read_body(r)) == 100


async def test_no_answer_is_described_in_a_few_words() -> None:
    from ddtree_tui.sim.process import free_port

    async with lhttp.session(timeout=5) as s:
        with pytest.raises(lhttp.REQUEST_ERRORS) as e:
            async with s.get(f"http://127.0.0.1:{free_port()}/"):
                pass
    assert lhttp.describe(e.value) == "connection refused"

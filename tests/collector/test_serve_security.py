"""The collector's guards: loopback by default, a token for anything else, the token never printed."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from ddtree_tui.cli import main
from ddtree_tui.collector.server import ListenError, load_or_create_token, parse_listen
from tests import httpc
from tests.collector.conftest import ServeProc


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


@pytest.mark.timeout(60)
def test_token_guards_every_route_but_the_probes(
    tmp_path: Path, serve_demo: Callable[..., ServeProc]
) -> None:
    tf = tmp_path / "collector.token"
    srv = serve_demo("--token-file", str(tf))
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
    assert httpc.get(f"{srv.url}/-/healthy", timeout=5).status_code == 200

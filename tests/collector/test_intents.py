"""Intents over HTTP (`serve --intents`): off by default, a token always, clear 400s for bad bodies; a TUI
attached with the token file launches and kills through the collector's one fleet (real sim processes)."""

from __future__ import annotations

import asyncio
import json
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ddtree_tui.collector.attach import AttachedFleet, read_token
from ddtree_tui.config import packaged_demo_profile
from ddtree_tui.model.intents import Kill, Launch
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.sim.config import TIME_SCALE_ENV
from tests import httpc
from tests.collector.conftest import ServeProc
from tests.util import free_port

DFLASH = ServiceRef("local", "dflash")


def _demo_profile(tmp_path: Path) -> Path:
    """The demo on ports of this test's own (other suites may run the demo at the same time)."""
    text = packaged_demo_profile().read_text(encoding="utf-8")
    text = text.replace("31010", str(free_port())).replace("31011", str(free_port()))
    p = tmp_path / "demo.toml"
    p.write_text(text, encoding="utf-8")
    return p


def _state(url: str, svc: str) -> str | None:
    snap = httpc.get(f"{url}/snapshot", timeout=5).json()
    return next((s["state"] for h in snap["hosts"] for s in h["services"] if s["name"] == svc), None)


def _wait_state(url: str, svc: str, want: str, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    st = _state(url, svc)
    while st != want and time.monotonic() < deadline:
        time.sleep(0.2)
        st = _state(url, svc)
    return st


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_intents_with_a_token_launch_and_kill_through_the_collector(
    tmp_path: Path, serve_demo: Callable[..., ServeProc], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the simulator the collector's fleet launches (its child, given this environment) 10 times faster: its
    # 1.5 s model load is not what is checked, the launch and the kill through the collector are
    monkeypatch.setenv(TIME_SCALE_ENV, "10")
    work = tmp_path / "collector"
    prof = _demo_profile(tmp_path)
    srv = await asyncio.to_thread(serve_demo, "--profile", str(prof), "--intents", cwd=work)
    tf = work / ".ddtree" / "collector.token"
    assert stat.S_IMODE(tf.stat().st_mode) == 0o600
    token = tf.read_text().strip()
    log = srv.log.read_text()
    assert "collector.token" in log and token not in log
    async with httpc.AClient(timeout=60) as c:
        assert (await c.get(f"{srv.url}/metrics")).status_code == 200  # reads on loopback stay open
        r = await c.post(f"{srv.url}/intents/launch", json={"ref": "local/dflash"})
        assert r.status_code == 401
        auth = {"Authorization": f"Bearer {token}"}
        r = await c.post(f"{srv.url}/intents/launch", json={"ref": "nohost"}, headers=auth)
        assert r.status_code == 400 and "ref" in r.json()["message"]
        r = await c.post(f"{srv.url}/intents/launch", json={"ref": "local/nosuch"}, headers=auth)
        assert r.status_code == 400 and "no service 'nosuch'" in r.json()["message"]
        r = await c.post(f"{srv.url}/intents/explode", json={}, headers=auth)
        assert r.status_code == 404
        r = await c.post(
            f"{srv.url}/intents/todo", json={"action": "add", "content": "bench dflash"}, headers=auth
        )
        assert r.status_code == 200 and r.json()["ok"]
        todos = json.loads((work / ".ddtree" / "todos.json").read_text())
        items = todos["todos"] if isinstance(todos, dict) else todos
        assert [t["content"] for t in items] == ["bench dflash"]
    # a TUI's backend attached with the token file launches and kills through the collector
    fleet = AttachedFleet(srv.url, token=read_token(tf))
    res = await fleet.do(Launch(ref=DFLASH))
    assert res.ok, res.message
    assert await asyncio.to_thread(_wait_state, srv.url, "dflash", "ready", 40) == "ready"
    res = await fleet.do(Kill(ref=DFLASH))
    assert res.ok, res.message
    assert await asyncio.to_thread(_wait_state, srv.url, "dflash", "stopped", 30) == "stopped"
    wrong = AttachedFleet(srv.url, token="x" * 40)
    res = await wrong.do(Launch(ref=DFLASH))
    assert not res.ok and res.suggestion == "attach with --token-file FILE"
    assert srv.stop() == 0


@pytest.mark.timeout(60)
def test_intents_are_off_unless_enabled(serve_demo: Callable[..., ServeProc]) -> None:
    srv = serve_demo()
    r = httpc.post(f"{srv.url}/intents/kill", json={"ref": "local/dflash"}, timeout=5)
    assert r.status_code == 403 and "--intents" in r.json()["message"]

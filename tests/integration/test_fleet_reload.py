"""Profiles edited while the app runs are picked up without a restart, and a running service survives it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ddtree_tui.config import ProfileError, load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.events import Notice
from tests.fixtures.services.support import write_sim_profile
from tests.util import free_port, until


def _profile(path: Path, work: Path, port: int, name: str = "loc") -> None:
    write_sim_profile(path, work, port, name, sim="load_time = 0.1\ndecode_rate = 500\n")


async def _step(aw, what: str, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    """Each step bounded, so a hang names the step instead of the whole test timing out."""
    try:
        return await asyncio.wait_for(aw, timeout)
    except TimeoutError:
        raise AssertionError(f"{what} did not finish in {timeout} s") from None


@pytest.mark.timeout(150)
async def test_reload_picks_up_an_edited_port_and_keeps_running_services(tmp_path: Path) -> None:
    prof_path = tmp_path / "loc.toml"
    work = tmp_path / "w"
    port_a, port_b = free_port(), free_port()
    _profile(prof_path, work, port_a)
    fleet = Fleet([load_profile(prof_path)], todos_path=tmp_path / "t.json", probe_interval=0.2)
    q = fleet.subscribe()
    await fleet.start()
    try:
        assert (await _step(fleet.launch("loc/sim"), "launch")).ok
        await until(lambda: fleet.snapshot().service("loc", "sim").state == "ready", 40, "ready")
        pid = fleet.snapshot().service("loc", "sim").pid

        # unchanged file: nothing restarts
        assert await _step(fleet.reload_profiles(), "reload unchanged") == []

        # a bad edit is refused, reported, and the old profile stays in force
        prof_path.write_text(prof_path.read_text().replace(f"port = {port_a}", 'port = "x"'))
        with pytest.raises(ProfileError):
            await _step(fleet.reload_profiles(), "reload bad")
        notices = []
        while not q.empty():
            ev = q.get_nowait()
            if isinstance(ev, Notice):
                notices.append(ev.text)
        assert any("profiles not reloaded" in n and "service[0].port" in n for n in notices), notices
        assert fleet.snapshot().service("loc", "sim").port == port_a

        # a good edit of the port: that host's watchers restart with the new spec
        _profile(prof_path, work, port_b)
        changes = await _step(fleet.reload_profiles(), "reload edited")
        assert changes == ["reloaded loc"]
        assert fleet.profiles()[0].get_service("sim").port == port_b
        # the running service was found again through its pidfile, not restarted
        await until(lambda: fleet.snapshot().service("loc", "sim").pid == pid, 20, "the same pid found again")
        assert fleet.snapshot().service("loc", "sim").state in ("ready", "starting", "unhealthy")
        # issue 19: not stuck at "starting" on the new port: ready on the port it really serves on, saying so
        await until(
            lambda: fleet.snapshot().service("loc", "sim").state == "ready", 20, "ready on the old port"
        )
        st = fleet.snapshot().service("loc", "sim")
        assert st.port == port_a and f"the profile says {port_b}: restart to apply" in (st.detail or "")
    finally:
        await _step(fleet.kill("loc/sim"), "kill", 40)
        await _step(fleet.stop(), "stop")


async def test_reload_adds_and_removes_hosts(tmp_path: Path) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    _profile(a, tmp_path / "wa", free_port(), "a")
    _profile(b, tmp_path / "wb", free_port(), "b")
    fleet = Fleet([load_profile(a)], todos_path=tmp_path / "t.json")
    await fleet.start()
    try:
        assert await fleet.reload_profiles([load_profile(a), load_profile(b)]) == ["added b"]
        assert [h.name for h in fleet.snapshot().hosts] == ["a", "b"]
        assert await fleet.reload_profiles([load_profile(b)]) == ["removed a"]
        assert [h.name for h in fleet.snapshot().hosts] == ["b"]
    finally:
        await fleet.stop()

"""Issue 29 in the TUI: the bench dialog with a stopped service whose port a foreign process holds. The stopped
service is shown, not ticked and cannot be ticked; a run measures the running one only and records its
verified identity; a load shape that names the stopped service leaves it out with a word on the screen.

A real fleet on a local profile: `up` is a simulated service launched through the fleet, `down` was never
launched and a plain socket started by this test listens on its port."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from textual.widgets import SelectionList

from ddtree_tui.bench.models import ShapeRequest
from ddtree_tui.config import load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.screen_text import until
from tests.fixtures.services.support import cleanup_workdir
from tests.util import free_ports

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ports() -> list[int]:
    return free_ports(2)


@pytest.fixture
def foreign(ports: list[int]) -> Iterator[socket.socket]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", ports[1]))
    s.listen(16)
    yield s
    s.close()


@pytest.fixture
async def fleet(tmp_path: Path, ports: list[int], foreign: socket.socket) -> AsyncIterator[Fleet]:
    svc = (
        'algorithm = "dflash"\nlauncher = "sim"\nkill_timeout = 5\nstartup_timeout = 20\n'
        "[service.sim]\naccept_length = 3.0\nload_time = 0.1\ndecode_rate = 2000\nseed = 1\n"
    )
    p = tmp_path / "loc.toml"
    p.write_text(
        f'name = "loc"\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{tmp_path / "w"}"\n'
        '[telemetry]\nsource = "none"\n\n'
        f'[[service]]\nname = "up"\nport = {ports[0]}\n{svc}\n[[service]]\nname = "down"\nport = {ports[1]}\n{svc}'
    )
    f = Fleet(
        [load_profile(p)],
        todos_path=tmp_path / "todos.json",
        history_path=tmp_path / "h.jsonl",
        telemetry=False,
        probe_interval=0.1,
    )
    await f.start()
    try:
        assert (await f.launch("loc/up")).ok
        await f.wait_service("loc/up", {"ready"}, 20)
        await f.wait_service("loc/down", {"stopped"}, 10)
        yield f
    finally:
        await f.stop()
        cleanup_workdir(tmp_path / "w")


@pytest.mark.slow
async def test_dialog_never_ticks_a_stopped_service_and_shapes_leave_it_out_in_words(
    fleet: Fleet, tmp_path: Path
) -> None:
    app = DDTreeApp(fleet, refresh_hz=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.bench.ready_refs() == ["loc/up"], 10, "loc/up ready in the view")
        app.bench.open(["loc/up", "loc/down"])  # even asked to preselect it, the dialog does not tick it
        await until(pilot, lambda: isinstance(app.screen, BenchSetupScreen), 5, "the bench dialog")
        await pilot.pause()
        sl = app.screen.query_one(SelectionList)
        opts = [sl.get_option_at_index(i) for i in range(sl.option_count)]
        down = next(o for o in opts if o.value == "loc/down")
        assert down.disabled and "not running" in str(down.prompt)
        assert list(sl.selected) == ["loc/up"]
        # space on every row: the stopped one cannot be ticked
        sl.focus()
        for _ in range(2):
            await pilot.press("space", "down")
        await pilot.pause()
        assert "loc/down" not in sl.selected
        if "loc/up" not in sl.selected:
            sl.select("loc/up")
        await pilot.press("ctrl+r")
        bench = app.query_one(BenchPane)
        await until(pilot, lambda: bench.live.run is not None and not bench.live.running, 60, "the run")
        run = bench.live.run
        assert run is not None and [t.ref for t in run.targets] == ["loc/up"]
        assert {r.service for r in run.results} == {"loc/up"}
        rec = json.loads((tmp_path / "h.jsonl").read_text().splitlines()[-1])
        assert [(t["ref"], t["identity"]["verdict"], t["identity"]["verified"]) for t in rec["targets"]] == [
            ("loc/up", "ours", True)
        ]

        # the load-shape path: the same rule, and a word the user sees
        app.bench.start_shape(
            ["loc/up", "loc/down"], ShapeRequest(load="rate:4", requests=2, warmup=0, max_new_tokens=4)
        )

        def left_out() -> str | None:
            return next(
                (str(n.message) for n in app._notifications if "loc/down left out" in str(n.message)), None
            )

        word = await until(pilot, left_out, 30, "the left-out word")
        assert word == "loc/down left out: the service is stopped"
        await until(pilot, lambda: bench.live.load_run is not None, 60, "the load run")
        load = bench.live.load_run
        assert load is not None and [t.ref for t in load.targets] == ["loc/up"]
        await asyncio.sleep(0)

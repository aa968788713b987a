"""The smoke test (the post-deploy curl) against a real simulated service on loopback: through the core, the
headless `smoke` mode in a child process, and the TUI's `s` key."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ddtree_tui.config import load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.events import Notice
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.palette import palette_commands
from tests.app.screen_text import until
from tests.fixtures.services.support import cleanup_workdir
from tests.util import BUSY_SLACK_S, cli_batch, free_port

pytestmark = pytest.mark.timeout(60)

REF = "loc/sim"


def _write_profile(tmp_path: Path) -> Path:
    p = tmp_path / "loc.toml"
    p.write_text(
        f'name = "loc"\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{tmp_path / "w"}"\n'
        '[telemetry]\nsource = "none"\n\n'
        f'[[service]]\nname = "sim"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {free_port()}\n'
        "kill_timeout = 5\nstartup_timeout = 20\n"
        "[service.sim]\naccept_length = 3.0\nload_time = 0.2\ndecode_rate = 2000\nseed = 1\n"
    )
    return p


async def _state(fleet: Fleet, want: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = next(s.state for h in fleet.snapshot().hosts for s in h.services if s.name == "sim")
        if state == want:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{REF} stayed {state}, wanted {want}")


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    p = _write_profile(tmp_path)
    yield p
    cleanup_workdir(tmp_path / "w")


@pytest.fixture
async def fleet(profile: Path, tmp_path: Path) -> AsyncIterator[Fleet]:
    f = Fleet(
        [load_profile(profile)],
        todos_path=tmp_path / "todos.json",
        history_path=tmp_path / "h.jsonl",
        telemetry=False,
        probe_interval=0.1,
    )
    await f.start()
    try:
        yield f
    finally:
        await f.stop()


async def _launch(fleet: Fleet) -> None:
    res = await fleet.launch(REF)
    assert res.ok, res.message
    await _state(fleet, "ready")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ddtree_tui.cli", "smoke", *args, "--profile", str(tmp_path / "loc.toml")]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=45)


async def test_smoke_ready_then_stopped(fleet: Fleet) -> None:
    q = fleet.subscribe()
    await _launch(fleet)
    res = await fleet.smoke(REF, max_new_tokens=12)
    assert res.ok, res.error
    assert res.ref == REF and res.error is None
    assert res.output_tokens == 12  # the server's count, not chunks (several tokens a chunk)
    assert res.accept_length is not None and res.accept_length > 1
    assert res.output and len(res.output) <= 200
    assert res.ttft_ms is not None and res.ttft_ms > 0 and res.tok_s and res.tok_s > 0
    assert res.latency_s is not None and res.latency_s < 5
    notices = []
    while not q.empty():
        ev = q.get_nowait()
        if isinstance(ev, Notice) and ev.text.startswith("smoke "):
            notices.append(ev)
    assert [n.severity for n in notices] == ["information"]
    assert notices[0].text.startswith(f"smoke {REF}: ok — 12 tokens")
    # the OpenAI chat API of the same service, the model name from its /v1/models
    chat = await fleet.smoke(REF, max_new_tokens=12, api="chat")
    assert chat.ok and chat.output_tokens == 12, chat.error

    assert (await fleet.kill(REF)).ok
    await _state(fleet, "stopped")
    t0 = time.monotonic()
    res = await fleet.smoke(REF, timeout=3)
    assert time.monotonic() - t0 < 3 + BUSY_SLACK_S  # ended by its timeout (or sooner), not a hang
    assert not res.ok and res.output_tokens is None
    # refused before anything is sent (issue 29: nothing of ours listens there), in the same words first
    assert res.error and res.error.startswith(
        "service is stopped; refused to measure loc/sim: loc/sim is not"
    )
    assert res.line().startswith(f"smoke {REF}: FAILED — service is stopped")

    with pytest.raises(ValueError, match="no service 'nope'"):
        await fleet.smoke("loc/nope")


async def test_smoke_times_out_on_a_stalled_stream(fleet: Fleet) -> None:
    """A server that accepts and never answers: bounded by the timeout, the error says so."""
    await _launch(fleet)
    pid = next(s.pid for h in fleet.snapshot().hosts for s in h.services if s.name == "sim")
    assert pid
    os.kill(pid, signal.SIGSTOP)  # our own child: the kernel still accepts, nothing ever answers
    try:
        t0 = time.monotonic()
        res = await fleet.smoke(REF, max_new_tokens=8, timeout=1.0)
        took = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not res.ok and "timeout" in (res.error or "")
    assert took < 1.0 + BUSY_SLACK_S  # bounded by the timeout, not the default one (BUSY_SLACK_S: why)


@pytest.mark.slow
@pytest.mark.timeout(180)  # 13 s idle, several CLI children: past the module's 60 s on a busy machine
async def test_cli_smoke_exit_codes(fleet: Fleet, tmp_path: Path) -> None:
    await _launch(fleet)
    # the four command lines in one child process (tests/cli_batch.py: the imports paid once, not four times)
    prof = ["--profile", str(tmp_path / "loc.toml")]
    ok, js, nope, bad = await asyncio.to_thread(
        cli_batch,
        [["smoke", REF, "--max-new-tokens", "8", *prof],
         ["smoke", REF, "--max-new-tokens", "5", "--json", "--prompt", "Hi", *prof],
         ["smoke", "loc/nope", *prof], ["smoke", "no-slash", *prof]],
        tmp_path,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert ok.stdout.startswith(f"smoke {REF}: ok — 8 tokens") and ", accept " in ok.stdout
    assert js.returncode == 0, js.stderr
    obj = json.loads(js.stdout)
    assert obj["ok"] is True and obj["output_tokens"] == 5 and obj["ref"] == REF and obj["accept_length"]
    assert nope.returncode == 2 and "no service 'nope'" in nope.stderr and "known: sim" in nope.stderr
    assert bad.returncode == 2 and "HOST/SVC" in bad.stderr

    assert (await fleet.kill(REF)).ok
    await _state(fleet, "stopped")
    p = await asyncio.to_thread(_cli, tmp_path, REF, "--timeout", "5")
    assert p.returncode == 1
    assert p.stdout.startswith(f"smoke {REF}: FAILED — service is stopped")


async def test_tui_key_s_smokes_the_selected_service(fleet: Fleet) -> None:
    await _launch(fleet)
    app = DDTreeApp(fleet, refresh_hz=20)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("3")
        await until(pilot, lambda: app.selected_service == REF, 5, "the service selected")
        await pilot.press("s")

        def smoked() -> str | None:
            return next((str(n.message) for n in app._notifications if "ok —" in str(n.message)), None)

        text = await until(pilot, smoked, 15, "the smoke notification")
        assert text.startswith(f"smoke {REF}: ok — 32 tokens")
    assert (await fleet.kill(REF)).ok


async def test_palette_smoke_for_every_service_and_frozen_view() -> None:
    """A StaticFleet answers with a failed result that says the view is frozen; nothing is sent."""
    from tests.app.snapdata import static_fleet

    fleet = static_fleet()
    refs = [f"{h.name}/{s.name}" for h in fleet.snapshot().hosts for s in h.services]
    app = DDTreeApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        cmds = {t: cb for t, _, cb in palette_commands(app)}
        assert refs and all(f"smoke {r}" in cmds for r in refs)
        cmds[f"smoke {refs[0]}"]()

        def frozen() -> str | None:
            return next((str(n.message) for n in app._notifications if "FAILED" in str(n.message)), None)

        text = await until(pilot, frozen, 5, "the frozen smoke notification")
        assert text == f"smoke {refs[0]}: FAILED — the view is frozen (snapshot mode): no request sent"

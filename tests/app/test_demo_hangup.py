"""Issue 25: closing the terminal of `ddtree-tui --demo` (here `tmux kill-session`, which hangs up the pane:
SIGHUP) after launching a service stops the demo's simulated server like `q` does, so the next demo can
launch on the same port; and a demo whose default ports are taken moves to free ones and says so."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ddtree_tui.sim.config import TIME_SCALE_ENV
from ddtree_tui.sim.process import demo_ports
from tests.app.test_tmux import EXE, Tmux, demo_profile, launch_dflash, tmux  # noqa: F401 (the fixture)
from tests.fixtures.services.support import cleanup_workdir
from tests.procs import alive


@contextlib.contextmanager
def _nothing_left(tmp_path: Path) -> Iterator[list[int]]:
    """The test puts the TUI pids it started in the list; however it ends, the demo's workdir is cleaned up
    (its simulators stopped) and a TUI still alive is killed by its pid: a failed run leaves nothing behind."""
    started: list[int] = []
    try:
        yield started
    finally:
        cleanup_workdir(tmp_path / ".ddtree" / "demo")
        for pid in started:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)  # a TUI this test started


def sim_pid(workdir: Path, svc: str) -> int:
    return int(json.loads((workdir / "run" / f"{svc}.json").read_text())["pid"])


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_closing_the_demos_terminal_stops_its_simulated_server(
    tmux: Tmux,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "10")  # the sim the TUI starts: its pace is not what is checked
    prof = demo_profile(tmp_path)
    cmd = f"cd {tmp_path} && TERM=screen-256color exec {EXE} --demo --profile {prof} --todos {tmp_path / 'todos.json'}"
    with _nothing_left(tmp_path) as started:
        tui, pid = _launch_dflash(tmux, cmd, tmp_path)
        started.append(tui)
        assert alive(pid)
        assert "ddtree-tui" in " ".join(psutil.Process(tui).cmdline())
        tmux.run("kill-session", "-t", "ui")  # the terminal goes away: SIGHUP to the TUI
        left = _gone_within([tui, pid], 30)
        assert tui not in left, "the TUI outlived its terminal"
        assert pid not in left, "the demo's simulated server outlived the TUI's terminal"


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_a_demo_whose_port_is_taken_moves_to_a_free_one_and_says_so(
    tmux: Tmux,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another demo holds the dflash port (here: our own listening socket on the profile's port)."""
    monkeypatch.setenv(TIME_SCALE_ENV, "10")  # the sims started here: their pace is not what is checked
    from ddtree_tui.config import load_profiles

    prof = demo_profile(tmp_path)
    profiles = load_profiles([prof])
    wanted = profiles[0].service[0].port
    with socket.socket() as held:
        held.bind(("127.0.0.1", wanted))
        held.listen()
        moved, notes = demo_ports(profiles)
        ports = [s.port for s in moved[0].service]
        assert ports[0] != wanted and ports[1] == profiles[0].service[1].port  # only the taken one moves
        assert notes == [
            f"demo: port {wanted} of local/dflash is in use (another demo or a test run?); using free port {ports[0]} instead"
        ]
        assert profiles[0].service[0].port == wanted  # the loaded profile itself is not changed

        # --run-bench --demo says so on stderr, and measures the service on its free port
        argv = [sys.executable, "-m", "ddtree_tui.cli", "--run-bench", "--demo", "--profile", str(prof),
                "--services", "local/dflash", "--max-new-tokens", "8", "--repeats", "1", "--warmup", "0",
                "--history", str(tmp_path / "h.jsonl")]  # fmt: skip
        p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=90)
        assert p.returncode == 0, p.stderr[-2000:]
        assert f"demo: port {wanted} of local/dflash is in use" in p.stderr, p.stderr[-2000:]

        # the TUI shows it, and launches the service on the free port
        try:
            cmd = f"cd {tmp_path} && TERM=screen-256color exec {EXE} --demo --profile {prof} --todos {tmp_path / 'todos.json'}"
            tmux.run("new-session", "-d", "-s", "ui", "-x", "160", "-y", "40", cmd)
            tmux.wait_for("● connected", 30)
            tmux.run("send-keys", "-t", "ui", "H")  # the message history: the bar's line may have gone by
            tmux.wait_for(f"demo: port {wanted} of local/dflash", 20)
            tmux.run("send-keys", "-t", "ui", "Escape")
            time.sleep(0.5)
            tmux.run("send-keys", "-t", "ui", "3")
            time.sleep(0.5)
            tmux.run("send-keys", "-t", "ui", "l")
            tmux.wait_for("● ready", 40)
            rec = json.loads((tmp_path / ".ddtree" / "demo" / "run" / "dflash.json").read_text())
            assert rec["port"] != wanted
        finally:
            cleanup_workdir(tmp_path / ".ddtree" / "demo")


def _launch_dflash(tmux: Tmux, cmd: str, tmp_path: Path) -> tuple[int, int]:  # noqa: F811
    """The TUI (`cmd`) in the session `ui`, local/dflash launched and ready: (the pane's pid, the sim's)."""
    return launch_dflash(tmux, cmd, 120, 36), sim_pid(tmp_path / ".ddtree" / "demo", "dflash")


def _gone_within(pids: list[int], bound_s: float) -> list[int]:
    """The pids still alive after waiting up to `bound_s` (a hang bound, not a measurement)."""
    deadline = time.monotonic() + bound_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


@pytest.mark.timeout(150)
@pytest.mark.slow
def test_a_hung_up_tui_whose_quit_never_returns_still_exits_and_stops_its_simulator(
    tmux: Tmux,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failure seen once under load: `q` did not return (here: a quit handler patched never to return),
    then the terminal went away (`tmux kill-server`). The app's exit was queued behind the stuck handler, so
    the TUI stayed, two Textual input threads spinning on the dead terminal, and its simulator with it. Now
    the hangup's last resort stops the fleet and ends the process."""
    monkeypatch.setenv(TIME_SCALE_ENV, "10")  # the sim the TUI starts: its pace is not what is checked
    script = tmp_path / "stuck_quit.py"
    script.write_text(
        "import asyncio, sys\n"
        "from ddtree_tui.ui.app import DDTreeApp\n"
        "async def never_returns(self):\n"
        "    self.notify('quit is stuck')\n"
        "    await asyncio.Event().wait()\n"
        "DDTreeApp.action_quit = never_returns\n"
        "from ddtree_tui.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    prof = demo_profile(tmp_path)
    cmd = (f"cd {tmp_path} && TERM=screen-256color exec {sys.executable} {script} --demo --profile {prof} "
           f"--todos {tmp_path / 'todos.json'}")  # fmt: skip
    with _nothing_left(tmp_path) as started:
        tui, pid = _launch_dflash(tmux, cmd, tmp_path)
        started.append(tui)
        tmux.run("send-keys", "-t", "ui", "q")
        tmux.wait_for("quit is stuck", 20)
        tmux.run("kill-server")  # the terminal goes away: SIGHUP (and SIGCONT) to the TUI
        left = _gone_within([tui, pid], 30)
        assert tui not in left, "the TUI outlived its terminal"
        assert pid not in left, "the demo's simulated server outlived the TUI's terminal"


@pytest.mark.timeout(150)
@pytest.mark.slow
def test_sighup_with_the_terminal_still_there_restores_it_stops_the_simulator_and_exits_129(
    tmux: Tmux,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`kill -HUP` while the terminal is alive: the app leaves like `q` (the screen restored, the demo's
    simulator stopped) and the status says a signal ended it (128 + 1)."""
    monkeypatch.setenv(TIME_SCALE_ENV, "10")  # the sim the TUI starts: its pace is not what is checked
    prof = demo_profile(tmp_path)
    # the shell runs the TUI as its child and writes its exit status as a shell sees it (tmux's own
    # pane_dead_status was read empty, the pane dead and never reaped, in runs at load ~9)
    rc = tmp_path / "rc"
    cmd = (f"cd {tmp_path} && TERM=screen-256color {EXE} --demo --profile {prof} --todos {tmp_path / 'todos.json'}"
           f"; echo $? > {rc}")  # fmt: skip
    with _nothing_left(tmp_path) as started:
        try:
            shell, pid = _launch_dflash(tmux, cmd, tmp_path)
            tmux.run("set-window-option", "-t", "ui", "remain-on-exit", "on")  # to read the screen after
            (tui,) = [
                c.pid for c in psutil.Process(shell).children() if "ddtree-tui" in " ".join(c.cmdline())
            ]
            started.append(tui)
            os.kill(tui, signal.SIGHUP)  # the TUI this test started
            left = _gone_within([tui, pid], 30)
            assert tui not in left, "the TUI did not leave on SIGHUP"
            assert pid not in left, "the demo's simulated server outlived the TUI"
            deadline = time.monotonic() + 20
            while not (rc.exists() and rc.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert rc.read_text().strip() == "129"  # 128 + SIGHUP, as the shell saw the TUI end
            assert "local/dflash" not in tmux.screen()  # the alternate screen left: the terminal restored
        finally:
            tmux.run("kill-session", "-t", "ui", check=False)  # a dead pane kept on exit: nothing for `q`

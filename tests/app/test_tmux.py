"""`ddtree-tui --demo` in a real terminal: a detached tmux session (its own server socket, 256 colours),
keys sent with send-keys, the screen read back with capture-pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ddtree_tui.sim.config import TIME_SCALE_ENV

EXE = Path(sys.executable).parent / "ddtree-tui"


class Tmux:
    def __init__(self, sock: str) -> None:
        self.sock = sock

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, timeout=10)
        if check and out.returncode != 0:
            raise AssertionError(f"tmux {args}: {out.stderr}")
        return out.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "ui")

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{screen}")

    def wait_until(self, cond: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        """Poll the screen until `cond` holds on it; fail with `what` and the last screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if cond(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{what}: not seen in {timeout} s; the screen:\n{screen}")

    def alive(self) -> bool:
        return (
            subprocess.run(
                ["tmux", "-L", self.sock, "has-session", "-t", "ui"], capture_output=True
            ).returncode
            == 0
        )


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if not shutil.which("tmux"):
        pytest.fail("tmux is not installed (apt-get install tmux)")
    # a socket of this run's own: tmp_path's name is the same in every pytest run, and two runs on one
    # machine (parallel sessions) shared a server ("duplicate session: ui", or one's kill-server ending the
    # other's session)
    t = Tmux(f"ddtree-test-{os.getpid()}-{tmp_path.name}")
    yield t
    if t.alive():  # leave with `q` so the demo stops the simulated services it launched
        t.run("send-keys", "-t", "ui", "Escape", check=False)
        time.sleep(0.5)  # sent together, Escape q reads as alt+q
        t.run("send-keys", "-t", "ui", "q", check=False)
        deadline = time.monotonic() + 45  # `q` stops the demo's services first: slow on a busy machine
        while t.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
    t.run("kill-server", check=False)  # only the server on our own socket


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_demo_in_tmux(tmux: Tmux, tmp_path: Path) -> None:
    cmd = f"cd {tmp_path} && TERM=screen-256color {EXE} --demo --todos {tmp_path / 'todos.json'}"
    tmux.run("new-session", "-d", "-s", "ui", "-x", "100", "-y", "30", cmd)
    tmux.wait_for("● connected", 30)
    for want in ("DEMO", "REPLAY", "SIMULATED", "Services", "local/dflash"):
        tmux.wait_for(want, 20)  # the first replayed sample may land a repaint after the connection
    tmux.run("send-keys", "-t", "ui", "?")
    tmux.wait_for("Keys (Esc or ? closes)")
    tmux.run("send-keys", "-t", "ui", "Escape")
    time.sleep(0.3)
    tmux.run("send-keys", "-t", "ui", "4")
    tmux.wait_for("Todos · 0/0 done")
    tmux.run("send-keys", "-t", "ui", "t")
    tmux.wait_for("New todo")
    tmux.run("send-keys", "-t", "ui", "-l", "check the demo")
    tmux.run("send-keys", "-t", "ui", "Enter")
    # the saved todo in the list (the title counts it) and the dialog gone: "check the demo" is on screen
    # in the dialog's own field before that, and a space sent then is typed into the closing dialog
    tmux.wait_for("0/1 done")
    deadline = time.monotonic() + 20
    while "New todo" in tmux.screen() and time.monotonic() < deadline:
        time.sleep(0.05)
    tmux.run("send-keys", "-t", "ui", " ")
    tmux.wait_for("[x]")
    tmux.run("send-keys", "-t", "ui", "q")
    deadline = time.monotonic() + 20
    while tmux.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not tmux.alive(), "q did not quit"
    assert "check the demo" in (tmp_path / "todos.json").read_text()


def demo_profile(tmp_path: Path) -> Path:
    """The shipped demo profile on free ports: parallel runs of the demo elsewhere hold 31010/31011."""
    import socket

    from ddtree_tui.config import packaged_demo_profile

    text = Path(packaged_demo_profile()).read_text()
    for old in ("31010", "31011"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            text = text.replace(f"port = {old}", f"port = {s.getsockname()[1]}")
    p = tmp_path / "local-demo.toml"
    p.write_text(text)
    return p


@pytest.mark.slow
@pytest.mark.timeout(120)
def launch_dflash(tmux: Tmux, cmd: str, width: int, height: int) -> int:
    """The demo TUI (`cmd`) in the session `ui` at `width` x `height`, local/dflash launched with `3` `l`
    and ready: the pane's pid."""
    tmux.run("new-session", "-d", "-s", "ui", "-x", str(width), "-y", str(height), cmd)
    pane = int(tmux.run("display-message", "-p", "-t", "ui", "#{pane_pid}").strip())
    tmux.wait_for("● connected", 30)
    tmux.wait_for("local/dflash", 20)
    tmux.run("send-keys", "-t", "ui", "3")
    time.sleep(0.5)
    tmux.run("send-keys", "-t", "ui", "l")
    tmux.wait_for("● ready", 40)
    return pane


def test_log_search_then_smoke_at_80x24_keeps_running(
    tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19's crash: `3` `l` (ready) `6` `/Prefill` Enter, then ctrl+p `smoke local/dflash` Enter."""
    monkeypatch.setenv(TIME_SCALE_ENV, "10")  # the sims the TUI starts: their pace is not what is checked
    prof = demo_profile(tmp_path)
    cmd = f"cd {tmp_path} && TERM=screen-256color {EXE} --demo --profile {prof} --todos {tmp_path / 'todos.json'}"
    launch_dflash(tmux, cmd, 80, 24)
    tmux.run("send-keys", "-t", "ui", "6", "/")
    tmux.wait_for("search Logs")
    tmux.run("send-keys", "-t", "ui", "-l", "Prefill")
    tmux.run("send-keys", "-t", "ui", "Enter")
    tmux.wait_for("/Prefill")
    tmux.run("send-keys", "-t", "ui", "C-p")
    tmux.wait_for("Search for commands")
    tmux.run("send-keys", "-t", "ui", "-l", "smoke local/dflash")
    # Enter only once the palette lists the command (typed in its field, and a hit below): its search runs
    # in a worker, and an Enter before a hit is there leaves the palette open (a busy machine's flake)
    tmux.wait_until(lambda s: s.count("smoke local/dflash") >= 2, "the palette's hit", 20)
    tmux.run("send-keys", "-t", "ui", "Enter")
    tmux.wait_until(lambda s: "Search for commands" not in s, "the palette to close", 20)
    # the smoke's result line (`smoke REF: N tokens …`) in the message bar: it ran beside the log search;
    # then its Prefill lines, once the log pane's tail has read them, shown under the search
    tmux.wait_for("smoke local/dflash:", 30)

    def prefill_shown(screen: str) -> bool:
        return any("Prefill" in ln and "/Prefill" not in ln for ln in screen.splitlines())

    screen = tmux.wait_until(prefill_shown, "no matching log line shown", 20)
    assert "Traceback" not in screen and "AttributeError" not in screen
    # the search is still on: its pattern in the pane's title, once the action toasts (3-6 s each, stacked
    # over the right half of an 80x24 screen, the title row too on a slow run) have gone
    screen = tmux.wait_until(
        lambda s: prefill_shown(s) and "/Prefill" in s, "the search kept in the title", 20
    )
    assert "Traceback" not in screen and "AttributeError" not in screen
    assert tmux.alive()


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_crash_exits_1_with_a_one_line_pointer(tmux: Tmux, tmp_path: Path) -> None:
    """A handler that raises (here: the smoke key, patched to fail) ends the real app with status 1 and one
    line naming the saved traceback, instead of a screenful of traceback and status 0."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import sys\n"
        "from ddtree_tui.ui.widgets.services import ServicesPane\n"
        "def boom(self):\n"
        "    raise RuntimeError('handler blew up')\n"
        "ServicesPane.action_smoke = boom\n"
        "from ddtree_tui.cli import main\n"
        f"sys.exit(main(['--demo', '--todos', {str(tmp_path / 'todos.json')!r}]))\n"
    )
    rc_file = tmp_path / "rc"
    cmd = f"cd {tmp_path} && TERM=screen-256color {sys.executable} {script}; echo $? > {rc_file}; sleep 30"
    tmux.run("new-session", "-d", "-s", "ui", "-x", "80", "-y", "24", cmd)
    tmux.wait_for("● connected", 30)
    tmux.run("send-keys", "-t", "ui", "3")
    time.sleep(0.5)
    tmux.run("send-keys", "-t", "ui", "s")
    screen = tmux.wait_for("traceback saved to", 20)
    deadline = time.monotonic() + 10
    while not rc_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    # the app has exited; the pane was kept (its `sleep`) only to be read: close it now rather than let the
    # fixture's `q` (which `sleep` ignores) wait 20 s for it
    tmux.run("kill-session", "-t", "ui", check=False)
    assert rc_file.read_text().strip() == "1"
    lines = [ln for ln in screen.splitlines() if "ddtree-tui: crashed" in ln]
    assert len(lines) == 1 and "RuntimeError: handler blew up" in lines[0], screen
    assert "Traceback (most recent call last)" not in screen
    saved = sorted(tmp_path.glob("crash-*.txt"))  # beside the todo file (default: .ddtree/)
    assert len(saved) == 1 and "handler blew up" in saved[0].read_text()
    assert saved[0].name in screen.replace("\n", "")

"""`ddtree-tui [--demo] [--profile ...] [--theme NAME]`: the terminal UI's mode handler (the app itself is
ddtree_tui/ui/app.py); a first run without profiles says how to write one and offers the demo.

The app is given a `StartingFleet` (fleet/starting.py), not the Fleet: the first frame is painted (the hosts
shown connecting) before the core and its engines are imported, in a thread, and the fleet started (issue 28:
first paint under 1 s). Nothing here imports the core at module level."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import queue
import signal
import sys
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ddtree_tui.cli.args import CliArgs, TuiArgs, WebArgs
from ddtree_tui.cli.common import UsageError, err, handler, profiles_of
from ddtree_tui.fleet.starting import StartingFleet
from ddtree_tui.todo import DEFAULT_TODOS
from ddtree_tui.ui.app import DDTreeApp, exit_code
from ddtree_tui.ui.skins import discover_themes

NO_PROFILES = """ddtree-tui: no host profiles found (looked in ./hostprofiles/ and the user config directory).
  Try it without any host:   ddtree-tui --demo   (this machine, simulated services, replayed GPU)
  Or describe a host:        one TOML file a host in ./hostprofiles/ (or the user config directory's
                             hostprofiles/); see hostprofiles/README.md and hostprofiles/examples/."""


def first_run(interactive: bool, answer: str | None = None) -> str | None:
    """No profiles anywhere: say how to write one and, at a terminal, offer the demo. 'demo' or None."""
    print(NO_PROFILES, file=sys.stderr)
    if not interactive:
        return None
    try:
        reply = answer if answer is not None else input("Start the demo now? [y/N] ")
    except EOFError:
        return None
    return "demo" if reply.strip().lower() in ("y", "yes") else None


def theme_of(args: TuiArgs | WebArgs) -> str:
    """--theme, checked against themes/ before the terminal is taken over (a usage error otherwise)."""
    theme = args.theme or "dark"
    known = discover_themes()
    if theme not in known:
        raise UsageError(f"unknown theme {theme!r} (known: {', '.join(known)})")
    return theme


def todos_of(args: CliArgs) -> Path:
    return Path(args.todos) if args.todos else DEFAULT_TODOS


def run_and_stop(app: DDTreeApp, notes: Sequence[str] = ()) -> int | None:
    """Run the app and, however it ends (`q`, a crash, a signal), stop what the fleet started on the same
    event loop, bounded in time (never a second loop after the app's has closed). SIGHUP (the terminal was
    closed, `tmux kill-window`) and SIGTERM leave like `q`: Python's default would end the process on the
    spot, and the demo's simulated servers would outlive it; the status is then 128 + the signal's number,
    as a shell reports a process a signal ended. `notes` are shown once the app is up."""
    hangup: Hangup | None = None

    async def main() -> int | None:
        nonlocal hangup
        loop = asyncio.get_running_loop()
        hangup = Hangup(app, loop)
        shown = asyncio.create_task(_notes_when_up(app, list(notes))) if notes else None
        try:
            return await app.run_async()
        finally:
            if shown is not None:
                shown.cancel()
            hangup.stopping = True  # a second SIGHUP must not cut the demo's cleanup short
            await app.shutdown_fleet(running=False)

    before = {sig: signal.getsignal(sig) for sig in HANGUP_SIGNALS}
    try:
        rc = asyncio.run(main())
    finally:
        for sig, handler in before.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)
    if hangup is not None and hangup.signum is not None:
        return 128 + hangup.signum
    return rc


HANGUP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
LEAVE_S = 8.0  # after SIGHUP or SIGTERM the app has this long to leave by itself; then the last resort


class Hangup:
    """SIGHUP and SIGTERM end the app like `q`. A plain signal handler, not the loop's: it must run even
    when the loop is stuck.

    The app's own exit is a message behind whatever its message loop is doing: a handler that does not
    return (a `q` whose stop did not end, under load) kept it, and the process, alive for good after the
    terminal closed. So the signal also starts a last resort: `LEAVE_S` later, if the process is still
    here, the fleet's stop (what this session launched: the demo's simulators) runs on the loop, bounded
    by the app's stop timeout, and the process exits (`os._exit`, 128 + the signal's number).

    A closed terminal (SIGHUP, and reads of the terminal fail with EIO) is let go at once: output to
    /dev/null (every write to it fails; Textual's output thread dies of that and its full queue blocked the
    loop), Textual's input thread stopped (on a hung-up terminal every read is an instant end of file, and
    its loop spins at full CPU), and Textual's driver told not to restart on the SIGCONT that the kernel
    sends a hung-up session's leader with the SIGHUP (its SIGCONT handler starts the application mode
    again: a second output thread and a second spinning input thread, seen in a stack dump)."""

    def __init__(self, app: DDTreeApp, loop: asyncio.AbstractEventLoop, leave_s: float = LEAVE_S) -> None:
        self.app = app
        self.loop = loop
        self.leave_s = leave_s
        self.stopping = False
        self.signum: int | None = None
        for sig in HANGUP_SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.signum is None and not self.stopping:
            self.signum = signum
            if signum == signal.SIGHUP and _terminal_gone():
                _let_go_of_terminal(self.app)
            threading.Thread(target=self._last_resort, name="hangup-exit", daemon=True).start()
        if not self.stopping:
            self.stopping = True
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to stop
                self.loop.call_soon_threadsafe(self.app.exit)

    def _last_resort(self) -> None:
        """Still here `leave_s` after the signal: stop the fleet on the loop (bounded), then exit."""
        time.sleep(self.leave_s)
        signum = self.signum or signal.SIGTERM
        with contextlib.suppress(Exception):  # stderr may be gone
            err(f"the app did not leave within {self.leave_s:g} s of {signal.Signals(signum).name}; exiting")
        wait_s = self.app.ctl.stop_timeout + 2.0
        with contextlib.suppress(Exception):  # the loop closed (the stop has run), or it did not answer
            asyncio.run_coroutine_threadsafe(self.app.shutdown_fleet(running=False), self.loop).result(wait_s)
        os._exit(128 + signum)


def _terminal_gone() -> bool:
    """The controlling terminal has hung up: asking it for its settings fails with EIO (a plain `kill -HUP`
    leaves a live terminal, which the app then restores as on `q`)."""
    try:
        termios.tcgetattr(0)
    except termios.error as e:
        return bool(e.args) and e.args[0] == errno.EIO
    except (OSError, ValueError):
        return False
    return False


def _let_go_of_terminal(app: DDTreeApp) -> None:
    """The terminal is gone: output to /dev/null, and Textual's driver (textual/drivers/linux_driver.py)
    neither reading it any longer nor starting again on the hangup's SIGCONT (see Hangup)."""
    _detach_terminal()
    driver = getattr(app, "_driver", None)
    if driver is not None:
        driver._auto_restart = False  # its SIGCONT handler restarts the application mode when this is set
        exit_event = getattr(driver, "exit_event", None)  # the input thread's loop runs until it is set
        if isinstance(exit_event, threading.Event):
            exit_event.set()
    threading.Thread(target=_drain_dead_writer, args=(app,), daemon=True).start()


def _detach_terminal() -> None:
    """Point stdout and stderr at /dev/null: the terminal is gone, writes must not fail (reads of the
    hung-up terminal already end at once)."""
    with contextlib.suppress(OSError):
        fd = os.open(os.devnull, os.O_WRONLY)
        for n in (1, 2):
            with contextlib.suppress(OSError):
                os.dup2(fd, n)
        os.close(fd)


def _drain_dead_writer(app: DDTreeApp) -> None:
    """Keep Textual's output queue moving once its writer thread has died (EIO after the hangup, before the
    output was moved to /dev/null), so that no write, nor the driver's close, blocks the event loop; ends
    at the close's None."""
    writer = getattr(getattr(app, "_driver", None), "_writer_thread", None)
    q = getattr(writer, "_queue", None)
    if writer is None or q is None:
        return
    while True:
        if writer.is_alive():
            time.sleep(0.1)
            continue
        try:
            if q.get(timeout=0.5) is None:
                return
        except queue.Empty:
            continue


async def _notes_when_up(app: DDTreeApp, notes: list[str]) -> None:
    """Show `notes` in the message line (and its history, H) once the app has painted its first screen."""
    for _ in range(600):
        if app.is_running:
            break
        await asyncio.sleep(0.1)

    def show() -> None:
        with contextlib.suppress(Exception):  # the app may already be gone
            for note in notes:
                app.notify(note, severity="warning", timeout=20)

    with contextlib.suppress(Exception):
        app.call_after_refresh(show)


@handler(None, TuiArgs)
def cli_main(ns: TuiArgs) -> int:
    """`ddtree-tui [--demo] [--profile ...] [--theme NAME]`: the terminal UI."""
    try:
        profiles = profiles_of(ns)
    except UsageError as e:
        err(str(e))
        return 2
    if not profiles and not ns.demo:
        choice = first_run(sys.stdin.isatty())
        if choice is None:
            return 2
        ns = ns.model_copy(update={"demo": True})
        profiles = profiles_of(CliArgs(demo=True))  # the packaged demo, whatever was named
    try:
        theme = theme_of(ns)
    except UsageError as e:
        err(str(e))
        return 2
    todos = todos_of(ns)
    notes: list[str] = []
    if ns.demo:  # its fixed ports may be another demo's (or a test run's): free ones then, said so
        from ddtree_tui.sim.process import demo_ports  # the simulator's modules: only for the demo

        profiles, notes = demo_ports(profiles)
        for note in notes:
            err(note)
    fleet = StartingFleet(profiles, todos_path=todos, demo=ns.demo)  # built and started after the first frame
    app = DDTreeApp(fleet, theme_name=theme, demo=ns.demo, crash_dir=todos.parent, readonly=ns.readonly)
    rc = run_and_stop(app, notes)
    return exit_code(app, rc)

"""`ddtree-tui [--demo] [--profile ...] [--theme NAME]`: the terminal UI's mode handler (the app itself is
ddtree_tui/ui/app.py); a first run without profiles says how to write one and offers the demo.

The app is given a `StartingFleet` (fleet/starting.py), not the Fleet: the first frame is painted (the hosts
shown connecting) before the core and its engines are imported, in a thread, and the fleet started (issue 28:
first paint under 1 s). Nothing here imports the core at module level."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import sys
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
    spot, and the demo's simulated servers would outlive it. `notes` are shown once the app is up."""

    async def main() -> int | None:
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
        return asyncio.run(main())
    finally:
        for sig, handler in before.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)


HANGUP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)


class Hangup:
    """SIGHUP and SIGTERM end the app like `q`. A plain signal handler, not the loop's: it must run even
    when the loop is stuck. After a hangup the terminal is gone and every write to it fails (EIO); Textual's
    output thread dies of that, and its full queue then blocks the event loop for good (the app never
    exits, the fleet is never stopped: seen under load). So on SIGHUP the terminal's output descriptors
    are pointed at /dev/null first, and should the output thread already be dead, its queue is drained."""

    def __init__(self, app: DDTreeApp, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        self.stopping = False
        self.hung_up = False
        for sig in HANGUP_SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGHUP and not self.hung_up:
            self.hung_up = True
            _detach_terminal()
            threading.Thread(target=_drain_dead_writer, args=(self.app,), daemon=True).start()
        if not self.stopping:
            self.stopping = True
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to stop
                self.loop.call_soon_threadsafe(self.app.exit)


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
    """Keep Textual's output queue moving once its writer thread has died (EIO after the hangup), so that no
    write, nor the driver's close, blocks the event loop; ends at the close's None."""
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

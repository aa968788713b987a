"""`ddtree-tui [--demo] [--profile ...] [--theme NAME]`: the terminal UI's mode handler (the app itself is
ddtree_tui/ui/app.py); a first run without profiles says how to write one and offers the demo."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from ddtree_tui.cli.common import UsageError, err, profiles_of
from ddtree_tui.fleet import Fleet
from ddtree_tui.sim.process import demo_ports
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


def theme_of(ns: argparse.Namespace) -> str:
    """--theme, checked against themes/ before the terminal is taken over (a usage error otherwise)."""
    theme = str(getattr(ns, "theme", None) or "dark")
    known = discover_themes()
    if theme not in known:
        raise UsageError(f"unknown theme {theme!r} (known: {', '.join(known)})")
    return theme


def todos_of(ns: argparse.Namespace) -> Path:
    return Path(ns.todos) if getattr(ns, "todos", None) else DEFAULT_TODOS


def run_and_stop(app: DDTreeApp, notes: Sequence[str] = ()) -> int | None:
    """Run the app and, however it ends (`q`, a crash, a signal), stop what the fleet started on the same
    event loop, bounded in time (never a second loop after the app's has closed). SIGHUP (the terminal was
    closed, `tmux kill-window`) and SIGTERM leave like `q`: Python's default would end the process on the
    spot, and the demo's simulated servers would outlive it. `notes` are shown once the app is up."""

    async def main() -> int | None:
        loop = asyncio.get_running_loop()
        for sig in HANGUP_SIGNALS:
            loop.add_signal_handler(sig, app.exit)
        shown = asyncio.create_task(_notes_when_up(app, list(notes))) if notes else None
        try:
            return await app.run_async()
        finally:
            if shown is not None:
                shown.cancel()
            for sig in HANGUP_SIGNALS:  # while stopping, a second SIGHUP must not cut the demo's cleanup
                loop.add_signal_handler(sig, lambda: None)
            await app.shutdown_fleet(running=False)

    return asyncio.run(main())


HANGUP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)


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


def cli_main(ns: argparse.Namespace) -> int:
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
        ns.demo = True
        profiles = profiles_of(argparse.Namespace(demo=True))  # the packaged demo, whatever was named
    try:
        theme = theme_of(ns)
    except UsageError as e:
        err(str(e))
        return 2
    todos = todos_of(ns)
    notes: list[str] = []
    if ns.demo:  # its fixed ports may be another demo's (or a test run's): free ones then, said so
        profiles, notes = demo_ports(profiles)
        for note in notes:
            err(note)
    fleet = Fleet(profiles, todos_path=todos, demo=bool(ns.demo))
    app = DDTreeApp(fleet, theme_name=theme, demo=bool(ns.demo), crash_dir=todos.parent)
    rc = run_and_stop(app, notes)
    return exit_code(app, rc)

"""`ddtree-tui [--demo] [--profile ...] [--theme NAME]`: the terminal UI's mode handler (the app itself is
ddtree_tui/ui/app.py); a first run without profiles says how to write one and offers the demo."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from ddtree_tui.cli.args import CliArgs, TuiArgs, WebArgs
from ddtree_tui.cli.common import UsageError, err, handler, profiles_of
from ddtree_tui.fleet import Fleet
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


def run_and_stop(app: DDTreeApp) -> int | None:
    """Run the app and, however it ends (`q`, a crash, a signal), stop what the fleet started on the same
    event loop, bounded in time (never a second loop after the app's has closed)."""

    async def main() -> int | None:
        try:
            return await app.run_async()
        finally:
            await app.shutdown_fleet(running=False)

    return asyncio.run(main())


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
    fleet = Fleet(profiles, todos_path=todos, demo=ns.demo)
    app = DDTreeApp(fleet, theme_name=theme, demo=ns.demo, crash_dir=todos.parent)
    rc = run_and_stop(app)
    return exit_code(app, rc)

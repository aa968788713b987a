"""The TUI on someone else's data: `--attach URL` (a collector), `--replay FILE` (a recording); and the TUI
recording its own session (`--record FILE`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from ddtree_tui.collector.attach import AttachedFleet, read_token
from ddtree_tui.ui.app import DDTreeApp, discover_themes


def cli_main(ns: argparse.Namespace) -> int:
    url = str(ns.attach)
    if not url.startswith(("http://", "https://")):
        print(f"ddtree-tui: --attach {url!r}: expected http://HOST:PORT", file=sys.stderr)
        return 2
    theme = getattr(ns, "theme", None) or "dark"
    if theme not in discover_themes():
        print(f"ddtree-tui: unknown theme {theme!r}", file=sys.stderr)
        return 2
    try:
        token = read_token(getattr(ns, "token_file", None))
    except OSError as e:
        print(f"ddtree-tui: token file: {e}", file=sys.stderr)
        return 2
    fleet = AttachedFleet(url, token=token)
    app = DDTreeApp(fleet, theme_name=theme)
    rc = app.run()
    with contextlib.suppress(Exception):
        asyncio.run(fleet.stop())
    return int(rc or 0)


def replay_main(ns: argparse.Namespace) -> int:
    """`ddtree-tui --replay FILE [--speed X]`: a recorded session played back, labelled REPLAY."""
    from ddtree_tui.collector.recording import RecordingError, session_fleet

    try:
        fleet = session_fleet(ns, lambda: None)
    except (RecordingError, ValueError) as e:
        print(f"ddtree-tui: {e}", file=sys.stderr)
        return 2
    app = DDTreeApp(fleet, theme_name=getattr(ns, "theme", None) or "dark")
    return int(app.run() or 0)


def record_main(ns: argparse.Namespace) -> int:
    """`ddtree-tui [--demo] --record FILE`: the normal TUI, its fleet's snapshots and events recorded."""
    from pathlib import Path

    from ddtree_tui.collector.recording import RecordingError, session_fleet
    from ddtree_tui.config import ProfileError, resolve_profiles
    from ddtree_tui.fleet import Fleet

    try:
        profiles = resolve_profiles(ns.profile, ns.profiles, bool(ns.demo))
        todos = Path(ns.todos) if getattr(ns, "todos", None) else Path(".ddtree/todos.json")
        fleet = session_fleet(ns, lambda: Fleet(profiles, todos_path=todos, demo=bool(ns.demo)))
    except (ProfileError, RecordingError, ValueError, OSError) as e:
        print(f"ddtree-tui: {e}", file=sys.stderr)
        return 2
    app = DDTreeApp(fleet, theme_name=getattr(ns, "theme", None) or "dark", demo=bool(ns.demo))
    rc = app.run()
    if app._fleet_started and not app._fleet_stopped:  # left without `q`: still close the recording
        with contextlib.suppress(Exception):
            asyncio.run(asyncio.wait_for(fleet.stop(), 15))
    return int(rc or 0)

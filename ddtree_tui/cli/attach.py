"""The TUI on someone else's data: `--attach URL` (a collector), `--replay FILE` (a recording); and the TUI
recording its own session (`--record FILE`)."""

from __future__ import annotations

import asyncio
import contextlib

from ddtree_tui.cli.args import TuiArgs
from ddtree_tui.cli.common import UsageError, err, handler, profiles_of
from ddtree_tui.cli.tui import run_and_stop, theme_of, todos_of
from ddtree_tui.collector.attach import AttachedFleet, read_token
from ddtree_tui.collector.recording import RecordingError, replay_fleet, session_fleet
from ddtree_tui.fleet import Fleet
from ddtree_tui.ui.app import DDTreeApp


@handler(None, TuiArgs)
def cli_main(ns: TuiArgs) -> int:
    """`ddtree-tui --attach URL`: the TUI following a collector (`serve`)."""
    url = str(ns.attach)
    if not url.startswith(("http://", "https://")):
        err(f"--attach {url!r}: expected http://HOST:PORT")
        return 2
    theme = ns.theme or "dark"
    try:
        theme_of(ns)
    except UsageError:
        err(f"unknown theme {theme!r}")
        return 2
    try:
        token = read_token(ns.token_file)
    except OSError as e:
        err(f"token file: {e}")
        return 2
    fleet = AttachedFleet(url, token=token)
    app = DDTreeApp(fleet, theme_name=theme, readonly=ns.readonly)
    rc = app.run()
    with contextlib.suppress(Exception):
        asyncio.run(fleet.stop())
    return int(rc or 0)


@handler(None, TuiArgs)
def replay_main(ns: TuiArgs) -> int:
    """`ddtree-tui --replay FILE [--speed X]`: a recorded session played back, labelled REPLAY."""
    try:
        fleet = replay_fleet(ns.session())
    except (RecordingError, ValueError) as e:
        err(str(e))
        return 2
    app = DDTreeApp(fleet, theme_name=ns.theme or "dark", readonly=True)
    return int(app.run() or 0)


@handler(None, TuiArgs)
def record_main(ns: TuiArgs) -> int:
    """`ddtree-tui [--demo] --record FILE`: the normal TUI, its fleet's snapshots and events recorded."""
    try:
        profiles = profiles_of(ns)
        todos = todos_of(ns)
        fleet = session_fleet(ns.session(), lambda: Fleet(profiles, todos_path=todos, demo=ns.demo))
    except (UsageError, RecordingError, ValueError, OSError) as e:
        err(str(e))
        return 2
    app = DDTreeApp(fleet, theme_name=ns.theme or "dark", demo=ns.demo, readonly=ns.readonly)
    rc = run_and_stop(app)  # left without `q` too: the recording is closed
    return int(rc or 0)

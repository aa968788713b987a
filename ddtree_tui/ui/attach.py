"""`ddtree-tui --attach URL`: the TUI on a collector's snapshots and events (ddtree_tui.collector.attach)."""

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

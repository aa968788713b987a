"""`ddtree-tui web`: the TUI in a browser, through textual-serve, attached to a collector.

Each browser tab gets its own TUI process, and every one of them is `ddtree-tui --attach URL`: the tabs share
the collector's ssh connections instead of opening their own. Bound to loopback by default; any other
address needs `--token-file` (0600, created when missing): a browser opens `/?token=…` once and then holds an
HttpOnly cookie; nothing else is served without it. The access log is off, so the token never reaches a log.
Every request, the WebSocket handshake that starts a tab's TUI first of all, passes the Host/Origin check of
hostcheck.py before anything else runs: a page on another site cannot open a TUI and type into it.
"""

from __future__ import annotations

import asyncio
import hmac
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from ddtree_tui.collector.hostcheck import AccessPolicy
from ddtree_tui.collector.limits import LimitedSite, ServerLimits

DEFAULT_WEB_LISTEN = "127.0.0.1:8765"
DEFAULT_COLLECTOR = "http://127.0.0.1:9464"
COOKIE = "ddtree_web"


def tui_command(attach: str, collector_token_file: str | None, theme: str | None) -> str:
    """The shell command textual-serve runs per browser tab (a token *file* path at most, never a token)."""
    argv = [sys.executable, "-m", "ddtree_tui.cli", "--attach", attach]
    if collector_token_file:
        argv += ["--token-file", str(Path(collector_token_file).resolve())]
    if theme:
        argv += ["--theme", theme]
    return shlex.join(argv)


def make_server(
    command: str, host: str, port: int, token: str | None, title: str, policy: AccessPolicy | None = None
) -> object:
    """textual-serve's Server, guarded: the Host/Origin check (`policy`, by default the listen address and its
    loopback aliases) runs first on every request, then the token check when there is a token."""
    from textual_serve.server import Server

    guard = policy or AccessPolicy(host, port)

    class GuardedServer(Server):
        """textual-serve's server plus the Host/Origin check, a token check (when asked) and no access log."""

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.insert(0, guard.middleware())
            if token is not None:
                app.middlewares.append(_token_guard(token))
            return app

        def initialize_logging(self) -> None:  # the default prints every request
            return None

    return GuardedServer(command, host=host, port=port, title=title)


def _token_guard(token: str) -> Middleware:
    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        given = request.query.get("token") or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            return web.Response(
                text="ddtree-tui web: open /?token=<the token in the token file>\n", status=401
            )
        resp = await handler(request)
        if "token" in request.query and isinstance(resp, web.Response):
            resp.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
        return resp

    return guard


async def run_web(
    server: object,
    host: str,
    port: int,
    stop: asyncio.Event,
    on_listening: Callable[[str], None] | None = None,
    limits: ServerLimits | None = None,
) -> None:
    """Serve until `stop` is set; no access log. `on_listening` hears the page's URL once it is bound."""
    limits = limits or ServerLimits()
    app = await server._make_app()  # type: ignore[attr-defined]
    runner = web.AppRunner(app, access_log=None, handle_signals=False, **limits.runner_kwargs())
    await runner.setup()
    try:
        await LimitedSite(runner, host, port, limits).start()
        if on_listening is not None:
            on_listening(f"http://{host}:{port}/")
        await stop.wait()
    finally:
        await runner.cleanup()

"""`ddtree-tui web`: the TUI in a browser, through textual-serve, attached to a collector.

Each browser tab gets its own TUI process, and every one of them is `ddtree-tui --attach URL`: the tabs share
the collector's ssh connections instead of opening their own. Bound to loopback by default; any other
address needs `--token-file` (0600, created when missing): a browser opens `/?token=…` once and then holds an
HttpOnly cookie; nothing else is served without it. The access log is off, so the token never reaches a log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from ddtree_tui.collector.server import ListenError, is_loopback, load_or_create_token, parse_listen

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


def make_server(command: str, host: str, port: int, token: str | None, title: str) -> object:
    from textual_serve.server import Server

    class GuardedServer(Server):
        """textual-serve's server plus a token check (when asked) and no access log."""

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            if token is not None:
                app.middlewares.append(_token_guard(token))
            return app

        def initialize_logging(self) -> None:  # the default prints every request
            return None

    return GuardedServer(command, host=host, port=port, title=title)


def _token_guard(
    token: str,
) -> Callable[
    [web.Request, Callable[[web.Request], Awaitable[web.StreamResponse]]], Awaitable[web.StreamResponse]
]:
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


async def run_web(server: object, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve until `stop` is set; no access log."""
    app = await server._make_app()  # type: ignore[attr-defined]
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        print(f"ddtree-tui: web view on http://{host}:{port}/", file=sys.stderr, flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def web_main(ns: argparse.Namespace) -> int:
    """`ddtree-tui web [--listen HOST:PORT] [--attach URL] [--token-file FILE]`."""
    try:
        host, port = parse_listen(ns.web_listen or DEFAULT_WEB_LISTEN)
        token: str | None = None
        if ns.web_token_file:
            token, created = load_or_create_token(Path(ns.web_token_file))
            if created:
                print(
                    f"ddtree-tui: a new token was written to {ns.web_token_file} (mode 600)", file=sys.stderr
                )
        elif not is_loopback(host):
            raise ListenError(
                f"--listen {ns.web_listen}: not a loopback address; give --token-file FILE so that a browser "
                "must present the token (or listen on 127.0.0.1)"
            )
        attach = ns.attach or DEFAULT_COLLECTOR
        if not attach.startswith(("http://", "https://")):
            raise ListenError(f"--attach {attach!r}: expected http://HOST:PORT of a `ddtree-tui serve`")
    except (ListenError, OSError) as e:
        print(f"ddtree-tui: {e}", file=sys.stderr)
        return 2
    command = tui_command(attach, getattr(ns, "token_file", None), getattr(ns, "theme", None))
    server = make_server(command, host, port, token, title=f"ddtree-tui · {attach}")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await run_web(server, host, port, stop)

    try:
        asyncio.run(main())
    except OSError as e:
        print(f"ddtree-tui: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        return 1
    return 0

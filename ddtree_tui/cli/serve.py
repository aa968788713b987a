"""`ddtree-tui serve` (a collector: one Fleet behind /metrics, /snapshot, /events) and `ddtree-tui web` (the
TUI in a browser, attached to a collector): their argument checks and messages; the servers themselves are
collector/server.py and collector/web.py."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import ValidationError

from ddtree_tui.cli.args import GuardArgs, ServeArgs, WebArgs
from ddtree_tui.cli.common import UsageError, handler, profiles_of
from ddtree_tui.collector.hostcheck import AccessPolicy, HostSpecError
from ddtree_tui.collector.limits import ServerLimits
from ddtree_tui.collector.recording import RecordingError, session_fleet
from ddtree_tui.collector.server import (
    DEFAULT_LISTEN,
    DEFAULT_TOKEN_FILE,
    Collector,
    ListenError,
    is_loopback,
    load_or_create_token,
    parse_listen,
    serve,
)
from ddtree_tui.collector.web import DEFAULT_COLLECTOR, DEFAULT_WEB_LISTEN, make_server, run_web, tui_command
from ddtree_tui.fleet import Fleet


def _say(msg: str) -> None:
    print(f"ddtree-tui: {msg}", file=sys.stderr, flush=True)


def _guards(ns: GuardArgs, host: str, port: int) -> tuple[AccessPolicy, ServerLimits]:
    """The Host/Origin policy and connection limits from --allow-host, --allow-origin, --max-connections,
    --header-timeout; raises ListenError naming the bad option."""
    try:
        policy = AccessPolicy(
            host,
            port,
            allow_hosts=ns.allow_host,
            allow_origins=ns.allow_origin,
        )
    except HostSpecError as e:
        raise ListenError(str(e)) from None
    try:
        given = {"max_connections": ns.max_connections, "header_timeout": ns.header_timeout}
        limits = ServerLimits.model_validate({k: v for k, v in given.items() if v is not None})
    except ValidationError as e:
        x = e.errors()[0]
        raise ListenError(f"--{str(x['loc'][0]).replace('_', '-')}: {x['msg']}") from None
    return policy, limits


def _until_signal(host: str, port: int, run: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run a server until SIGINT, SIGTERM or SIGHUP (its terminal closed) sets its stop event: a clean stop,
    exit 0; exit 1 when it cannot listen."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await run(stop)

    try:
        asyncio.run(main())
    except OSError as e:  # the port is taken, the address is not ours
        _say(f"cannot listen on {host}:{port}: {e}")
        return 1
    return 0


@handler("serve", ServeArgs)
def serve_main(ns: ServeArgs) -> int:
    """`ddtree-tui serve [--listen HOST:PORT] [--token-file FILE]`; exit 2 for a bad listen or profile."""
    try:
        host, port = parse_listen(ns.listen or DEFAULT_LISTEN)
        policy, limits = _guards(ns, host, port)
        token: str | None = None
        token_file, intents = ns.token_file, ns.intents
        intent_token: str | None = None
        if intents and not token_file:  # intents always need a token; reads on loopback stay open
            intent_token, created = load_or_create_token(DEFAULT_TOKEN_FILE)
            _say(
                f"intents need the bearer token in {DEFAULT_TOKEN_FILE} (mode 600)"
                + (" (new)" if created else "")
            )
        if token_file:
            token, created = load_or_create_token(Path(token_file))
            if created:
                _say(f"a new token was written to {token_file} (mode 600)")
        elif not is_loopback(host):
            raise ListenError(
                f"--listen {ns.listen}: not a loopback address; give --token-file FILE so that clients "
                "must present a bearer token (or listen on 127.0.0.1)"
            )
        profiles = [] if ns.replay else profiles_of(ns)
    except (ListenError, UsageError, OSError) as e:
        _say(str(e))
        return 2
    todos = Path(ns.todos) if ns.todos else None
    try:
        fleet = session_fleet(
            ns.session(), lambda: Fleet(profiles, todos_path=todos, demo=ns.demo, auto_complete_todos=False)
        )
    except (RecordingError, ValueError, OSError) as e:
        _say(str(e))
        return 2

    def listening(coll: Collector, bound: int) -> None:
        _say(f"collector listening on http://{host}:{bound}/metrics")

    def run(stop: asyncio.Event) -> Awaitable[None]:
        return serve(fleet, host, port, token=token, intents=intents, intent_token=intent_token, stop=stop,
                     on_listening=listening, policy=policy, limits=limits)  # fmt: skip

    return _until_signal(host, port, run)


@handler("web", WebArgs)
def web_main(ns: WebArgs) -> int:
    """`ddtree-tui web [--listen HOST:PORT] [--attach URL] [--token-file FILE]`."""
    try:
        host, port = parse_listen(ns.web_listen or DEFAULT_WEB_LISTEN)
        policy, limits = _guards(ns, host, port)
        token: str | None = None
        if ns.web_token_file:
            token, created = load_or_create_token(Path(ns.web_token_file))
            if created:
                _say(f"a new token was written to {ns.web_token_file} (mode 600)")
        elif not is_loopback(host):
            raise ListenError(
                f"--listen {ns.web_listen}: not a loopback address; give --token-file FILE so that a browser "
                "must present the token (or listen on 127.0.0.1)"
            )
        attach = ns.attach or DEFAULT_COLLECTOR
        if not attach.startswith(("http://", "https://")):
            raise ListenError(f"--attach {attach!r}: expected http://HOST:PORT of a `ddtree-tui serve`")
    except (ListenError, OSError) as e:
        _say(str(e))
        return 2
    command = tui_command(attach, ns.token_file, ns.theme)
    server = make_server(command, host, port, token, title=f"ddtree-tui · {attach}", policy=policy)

    def run(stop: asyncio.Event) -> Awaitable[None]:
        return run_web(
            server, host, port, stop, on_listening=lambda u: _say(f"web view on {u}"), limits=limits
        )

    return _until_signal(host, port, run)

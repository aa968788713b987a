"""Who may talk to our two HTTP servers (`serve`, `web`): the Host and Origin checks.

A server on loopback is still reachable from every web page the user opens. Browsers apply no CORS to
WebSockets, so a page can open ws://127.0.0.1:PORT/ws and type into the TUI it starts; and DNS rebinding
(evil.example made to resolve to 127.0.0.1) lets a page read /snapshot or /logs under its own name. Both need a
request whose Host or Origin is not ours. So every request must name this server in `Host` (its listen
address, the localhost / 127.0.0.1 / [::1] aliases of a loopback or wildcard listen, the machine's own names off
loopback, or an `--allow-host` entry), and a request that carries an `Origin` must come from one of those (or
an `--allow-origin` entry). A mismatch is a 403, logged with the Host, Origin, method and path (never a query
string, a cookie or a token; at most one line a second, the rest counted into the next). A request without
`Host` cannot come from a browser and is let through.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("0.0.0.0", "::", "[::]")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class HostSpecError(ValueError):
    """An --allow-host or --allow-origin value that cannot be a Host or an Origin."""


def _name(host: str) -> str:
    """A host as it appears in a Host header: lower case, an IPv6 address in brackets."""
    h = host.strip().lower()
    if ":" in h and not h.startswith("["):
        h = f"[{h}]"
    return h


def split_host(value: str, default_port: int | None = 80) -> tuple[str, int | None]:
    """'name:port', '[v6]:port', 'name' -> (name as in a Host header, port or `default_port`).
    Raises HostSpecError for a malformed one."""
    v = value.strip().lower()
    if not v or any(c.isspace() or c in "/?#@\\" for c in v):
        raise HostSpecError(f"{value!r} is not HOST[:PORT]")
    if v.startswith("["):
        name, sep, rest = v.partition("]")
        name += "]"
        if not sep or (rest and not rest.startswith(":")):
            raise HostSpecError(f"{value!r} is not [ADDRESS][:PORT]")
        port_s = rest[1:] if rest else ""
    elif v.count(":") == 1:
        name, _, port_s = v.partition(":")
    elif ":" in v:  # a bare IPv6 address
        name, port_s = _name(v), ""
    else:
        name, port_s = v, ""
    if not name or name == "[]":
        raise HostSpecError(f"{value!r} names no host")
    if not port_s:
        return name, default_port
    if not port_s.isdigit() or not 0 < int(port_s) <= 65535:
        raise HostSpecError(f"{value!r}: port {port_s!r} is not a port number")
    return name, int(port_s)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def _machine_names() -> set[str]:
    names = {socket.gethostname().lower()}
    try:
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return {n for n in names if n}


class AccessPolicy:
    """The Host names and Origins one server accepts; `port` is the listen port (`bind` sets the one the system
    chose for port 0)."""

    def __init__(
        self,
        listen_host: str,
        port: int,
        *,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
    ) -> None:
        self.port = port
        listen = _name(listen_host)
        self.wildcard = listen in WILDCARDS
        names = {listen} if not self.wildcard else set()
        if self.wildcard or _is_loopback(listen):
            names.update(LOOPBACK_NAMES)
        if not _is_loopback(listen):
            names.update(_machine_names())  # a scrape or a browser off this machine uses its name
        self.names = names
        try:
            self.extra_hosts: set[tuple[str, int | None]] = {split_host(h, None) for h in allow_hosts}
        except HostSpecError as e:
            raise HostSpecError(f"--allow-host {e}") from None
        self.extra_origins = {self._origin_spec(o) for o in allow_origins}
        self.listeners: list[Callable[[str], None]] = []  # hear "host" / "origin" for each refusal (metrics)
        self._last_log = 0.0
        self._unlogged = 0

    @staticmethod
    def _origin_spec(value: str) -> str:
        o = value.strip().lower().rstrip("/")
        parts = urlsplit(o)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
            raise HostSpecError(
                f"--allow-origin {value!r}: expected SCHEME://HOST[:PORT], e.g. http://app:3000"
            )
        return o

    def bind(self, port: int) -> None:
        self.port = port

    def _named(self, name: str, port: int | None) -> bool:
        """This server's own name (or an allowed one) with its port."""
        if (name, port) in self.extra_hosts or (name, None) in self.extra_hosts:
            return True
        return port == self.port and name in self.names

    def host_ok(self, value: str) -> bool:
        try:
            name, port = split_host(value, 80)
        except HostSpecError:
            return False
        # an IP literal cannot be rebound: on a wildcard listen it is one of our addresses (or a forward to one)
        return self._named(name, port) or (self.wildcard and port == self.port and _is_ip(name))

    def origin_ok(self, value: str, host: str | None = None) -> bool:
        """An Origin of this server: its own names, an allowed one, or exactly the request's (accepted) Host."""
        o = value.strip().lower().rstrip("/")
        if o in self.extra_origins:
            return True
        parts = urlsplit(o)
        if parts.scheme not in _DEFAULT_PORTS or not parts.netloc or parts.path or "@" in parts.netloc:
            return False  # "null" (a sandboxed frame, a file:// page) and anything odd
        default = _DEFAULT_PORTS[parts.scheme]
        try:
            origin = split_host(parts.netloc, default)
            same = host is not None and split_host(host, default) == origin
        except HostSpecError:
            return False
        return same or self._named(*origin)

    def refusal(self, host: str | None, origin: str | None) -> tuple[str, str] | None:
        """(which header, why) a request with these headers is refused, or None when it may go on."""
        if host is not None and not self.host_ok(host):
            return "host", f"Host {host[:200]!r} is not this server (give --allow-host to accept it)"
        if origin is not None and not self.origin_ok(origin, host):
            return (
                "origin",
                f"Origin {origin[:200]!r} may not use this server (give --allow-origin to accept it)",
            )
        return None

    def _refused(self, kind: str, method: str, path: str, why: str) -> None:
        for fn in self.listeners:
            fn(kind)
        now = time.monotonic()
        if now - self._last_log < 1.0:  # a page can send thousands a second: one line a second
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more refused before this)" if self._unlogged else ""
        self._last_log, self._unlogged = now, 0
        log.warning("refused %s %r: %s%s", method[:20], path[:200], why, more)

    def middleware(self) -> Middleware:
        """An aiohttp middleware that answers a refused request with 403 before any handler runs (no
        WebSocket is accepted, no process started)."""

        @web.middleware
        async def host_and_origin(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            refused = self.refusal(request.headers.get("Host"), request.headers.get("Origin"))
            if refused is not None:
                kind, why = refused
                self._refused(kind, request.method, request.path, why)
                return web.Response(status=403, text=f"ddtree-tui: forbidden: {why}\n")
            return await handler(request)

        return host_and_origin

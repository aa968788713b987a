"""A host over SSH: one persistent asyncssh connection per host, a new channel per command, a supervisor that
reconnects with backoff and publishes the connection state.

Why it is built this way:
- Opening a session channel on an open connection costs ~100 ms on loopback, a full `ssh` spawn ~300 ms, a line
  over an already-open channel ~0.3 ms (see benchmarks/transport.py): one connection, many channels.
- Host keys are always checked: `strict` refuses an unknown or changed key, `accept-new` records an unknown
  key in known_hosts (like OpenSSH's StrictHostKeyChecking=accept-new) and still refuses a changed one.
- Closing an SSH channel does not end a remote process that neither reads nor writes, so every command runs
  under a small POSIX sh wrapper (`_WRAPPER`) that watches the channel's stdin: when the channel closes (we
  cancel, time out, or the connection dies) the wrapper kills the command's whole process group (sshd makes
  each session its own group; a process that called setsid() itself, like a daemonised server, is left alone).
  Because stdin is the watch line, `input` is framed: the wrapper hands exactly len(input) bytes to the
  command's stdin (`head -c N`), then EOF, and keeps watching the rest of the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import asyncssh

from ddtree_tui.config import HostProfile
from ddtree_tui.model.snapshot import ConnStatus
from ddtree_tui.transport.base import Argv, Env, Lines, RunResult, Transport, TransportError, quote_argv

# $1 = number of input bytes for the command's stdin, then the command's argv. The command runs in the
# background; with input, exactly $1 bytes of the channel's stdin reach it through a FIFO (`head -c`, which
# never reads past its count). Then a watcher reads the rest of the channel's stdin: EOF there while the
# command still runs means the client went away (cancel, timeout, lost connection), so it kills the session's
# process group, TERM then KILL. When the command ends by itself the wrapper kills the watcher and exits with
# the command's status (re-raising its signal, so the client sees exit-signal as with a plain exec).
_WRAPPER = (  # one line: some login shells (csh) refuse newlines inside a quoted word
    r"n=$1; shift; exec 3<&0 </dev/null; "
    r'if [ "$n" -gt 0 ]; then d=$(mktemp -d) && mkfifo "$d/in" || exit 125; '
    r'"$@" <"$d/in" 3<&- & p=$!; head -c "$n" <&3 >"$d/in"; rm -rf "$d"; '
    r'else "$@" 3<&- & p=$!; fi; '
    r"( trap '' TERM; cat <&3; kill -TERM 0; sleep 1; kill -KILL 0 ) >/dev/null 2>&1 & w=$!; "
    r"wait $p 2>/dev/null; s=$?; kill -KILL $w 2>/dev/null; "
    r'if [ "$s" -gt 128 ] && [ "$s" -lt 160 ]; then kill -$((s - 128)) $$; fi; exit $s'
)

_READ_CHUNK = 65536


def wrap_command(argv: Sequence[str], env: Mapping[str, str] | None = None, input_len: int = 0) -> str:
    """The remote command line for argv: quoted word by word and run under the stdin-watching wrapper."""
    if not argv:
        raise ValueError("empty argv")
    return "exec " + quote_argv(["sh", "-c", _WRAPPER, "sh", str(input_len), *argv], env)


def _host_label(host: str, port: int | None) -> str:
    return f"[{host}]:{port}" if port and port != 22 else host


class _Client(asyncssh.SSHClient):
    """Per-connection callbacks: host-key policy for keys known_hosts does not vouch for, and loss reports."""

    def __init__(self, owner: SshTransport) -> None:
        self._owner = owner

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._owner._judge_host_key(host, addr, port, key)

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._lost_reason = _describe(exc) if exc else "connection closed by the host"


def _describe(exc: BaseException, *, timeout: float | None = None) -> str:
    """One line a human can act on, for any connect or channel failure."""
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"connect timed out after {timeout:g} s" if timeout else "timed out"
    if isinstance(exc, asyncssh.PermissionDenied):
        return f"authentication failed: {exc.reason}"
    if isinstance(exc, asyncssh.DisconnectError):
        return exc.reason or type(exc).__name__
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__


class SshTransport(Transport):
    """A host reached through asyncssh; see the module docstring for the design."""

    def __init__(
        self,
        profile: HostProfile,
        *,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        super().__init__(profile)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._conn: asyncssh.SSHClientConnection | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._wake = asyncio.Event()
        self._closing = False
        self._lost_reason: str | None = None
        self._hostkey_problem: str | None = None
        self._known_hosts_files: list[Path] = []
        self._forwards: dict[tuple[str, int], asyncio.Server] = {}
        self._pumps: set[asyncio.Task[None]] = set()

    # --- connection supervision -------------------------------------------------------------------------

    @property
    def connection(self) -> asyncssh.SSHClientConnection | None:
        """The live asyncssh connection, for callers that need a raw channel (benchmarks); None when down."""
        return self._conn

    async def start(self) -> None:
        if self._supervisor is None or self._supervisor.done():
            self._closing = False
            self._supervisor = asyncio.create_task(self._supervise(), name=f"ssh-supervisor-{self.name}")

    async def wait_connected(self, timeout: float | None = None) -> bool:
        if self._conn is not None:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._connected.wait()
        except TimeoutError:
            return False
        return self._conn is not None

    def reconnect_now(self) -> None:
        """Skip the rest of the current backoff wait (a user's "retry now")."""
        self._wake.set()

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        for srv in self._forwards.values():
            srv.close()
        self._forwards.clear()
        for task in list(self._pumps):
            task.cancel()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
            self._supervisor = None
        conn, self._conn = self._conn, None
        self._connected.clear()
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await conn.wait_closed()
        self._set_status(ConnStatus(state="disconnected", error="closed", since=time.time()))

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with equal jitter: half fixed, half random, capped."""
        d = min(self.backoff_max, self.backoff_base * 2.0 ** max(0, attempt - 1))
        return d / 2 + random.uniform(0, d / 2)

    async def _supervise(self) -> None:
        attempt = 0
        error: str | None = None
        while not self._closing:
            self._set_status(ConnStatus(state="connecting", error=error, since=time.time(), attempts=attempt))
            try:
                conn = await self._connect()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                error = self._hostkey_problem or _describe(e, timeout=self.profile.connect_timeout)
                attempt += 1
                await self._backoff(attempt, error)
                continue
            self._conn, self._lost_reason = conn, None
            attempt, error = 0, None
            self._set_status(ConnStatus(state="connected", since=time.time()))
            self._connected.set()
            await conn.wait_closed()
            self._conn = None
            self._connected.clear()
            if self._closing:
                break
            error = f"connection lost: {self._lost_reason or 'closed'}"
            attempt = 1
            await self._backoff(attempt, error)

    async def _backoff(self, attempt: int, error: str) -> None:
        delay = self._delay(attempt)
        self._set_status(
            ConnStatus(
                state="disconnected",
                error=error,
                since=time.time(),
                next_retry_at=time.time() + delay,
                attempts=attempt,
            )
        )
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._wake.wait()

    def _load_options(self) -> asyncssh.SSHClientConnectionOptions:
        """~/.ssh/config for this host (HostName, User, Port, IdentityFile, ProxyJump...), profile overrides."""
        kw: dict[str, Any] = {
            "host": self.profile.address,
            "connect_timeout": self.profile.connect_timeout,
            "keepalive_interval": self.profile.keepalive_interval,
            "keepalive_count_max": self.profile.keepalive_count_max,
        }
        if self.profile.user:
            kw["username"] = self.profile.user
        if self.profile.port:
            kw["port"] = self.profile.port
        return asyncssh.SSHClientConnectionOptions(**kw)

    def _resolve_known_hosts(self, opts: asyncssh.SSHClientConnectionOptions) -> list[Path]:
        """known_hosts files: the config's UserKnownHostsFile (+Global), else ~/.ssh/known_hosts. A config
        that says `UserKnownHostsFile none` still gets ~/.ssh/known_hosts: checking is never switched off."""
        configured = opts.known_hosts if isinstance(opts.known_hosts, list | tuple) else []
        files = [Path(os.path.expanduser(str(f))) for f in configured if str(f).lower() != "none"]
        return files or [Path("~/.ssh/known_hosts").expanduser()]

    async def _connect(self) -> asyncssh.SSHClientConnection:
        loop = asyncio.get_running_loop()
        opts = await loop.run_in_executor(None, self._load_options)
        self._known_hosts_files = self._resolve_known_hosts(opts)
        existing = [str(f) for f in self._known_hosts_files if f.is_file()]
        self._hostkey_problem = None
        timeout = self.profile.connect_timeout
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancel that races completion
        async with asyncio.timeout(timeout):
            return await asyncssh.connect(
                self.profile.address,
                self.profile.port or (),
                options=opts,
                known_hosts=existing or b"",  # never None: None would switch host key checking off
                client_factory=lambda: _Client(self),
            )

    def _judge_host_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Called for a host key that known_hosts does not list: accept-new takes an unknown host's key and
        records it; a host known_hosts lists with other keys is refused in every mode."""
        label = _host_label(host, port)
        existing = [str(f) for f in self._known_hosts_files if f.is_file()]
        listed = False
        if existing:
            try:
                trusted, cas, revoked, *_ = asyncssh.match_known_hosts(
                    existing, host, addr, port if port != 22 else None
                )
                listed = bool(trusted or cas or revoked)
            except Exception:  # an unreadable known_hosts must not mean "unknown, accept"
                listed = True
        first = self._known_hosts_files[0]
        if listed:
            self._hostkey_problem = (
                f"host key for {label} does not match the one in known_hosts ({first}): the host was "
                f"reinstalled or someone is in the middle; if you trust it, run ssh-keygen -R '{label}' "
                f"and connect again"
            )
            return False
        if self.profile.known_hosts != "accept-new":
            self._hostkey_problem = (
                f"host key for {label} is not in known_hosts (strict); add it with ssh-keyscan or set "
                f'known_hosts = "accept-new"'
            )
            return False
        algo, blob = key.export_public_key("openssh").decode().split()[:2]
        try:
            first.parent.mkdir(parents=True, exist_ok=True)
            with first.open("a", encoding="utf-8") as f:
                f.write(f"{label} {algo} {blob}\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            self._hostkey_problem = f"cannot record the host key for {label} in {first}: {e.strerror}"
            return False
        return True

    def _require_conn(self) -> asyncssh.SSHClientConnection:
        conn = self._conn
        if conn is None:
            why = self.status.error or self.status.state
            raise TransportError(f"{self.name}: not connected: {why}")
        return conn

    # --- commands --------------------------------------------------------------------------------------

    async def _open(
        self, argv: Sequence[str], env: Mapping[str, str] | None, data: bytes, merge_stderr: bool
    ) -> asyncssh.SSHClientProcess[bytes]:
        conn = self._require_conn()
        cmd = wrap_command([str(a) for a in argv], env, len(data))
        try:
            proc = await conn.create_process(
                cmd, encoding=None, stderr=asyncssh.STDOUT if merge_stderr else asyncssh.PIPE
            )
        except (asyncssh.Error, OSError) as e:
            raise TransportError(f"{self.name}: cannot open a channel: {_describe(e)}") from None
        if data:
            proc.stdin.write(data)  # never write_eof: EOF on the channel's stdin means "kill it"
        return proc

    async def run(
        self, argv: Argv, *, timeout: float | None = 30.0, input: str | None = None, env: Env = None
    ) -> RunResult:
        t0 = time.monotonic()
        data = input.encode() if input is not None else b""
        proc = await self._open(argv, env, data, merge_stderr=False)
        out: list[bytes] = []
        err: list[bytes] = []

        async def drain(reader: asyncssh.SSHReader[bytes], buf: list[bytes]) -> None:
            while chunk := await reader.read(_READ_CHUNK):
                buf.append(chunk)

        async def finish() -> None:
            await asyncio.gather(drain(proc.stdout, out), drain(proc.stderr, err))
            await proc.wait_closed()

        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await finish()
        except TimeoutError:
            timed_out = True
        except (asyncssh.Error, OSError) as e:
            proc.close()
            raise TransportError(f"{self.name}: {argv[0]}: {_describe(e)}") from None
        finally:
            if proc.exit_status is None and proc.exit_signal is None:
                proc.close()  # the wrapper sees the channel go and kills the process group
        status = proc.exit_status
        if not timed_out and status is None and proc.exit_signal is None:
            raise TransportError(f"{self.name}: connection lost while running {argv[0]}")
        status = None if proc.exit_signal else status
        return RunResult.finished(argv, status, b"".join(out), b"".join(err), t0, timed_out)

    async def stream(
        self, argv: Argv, *, input: str | None = None, env: Env = None, stderr: bool = False
    ) -> Lines:
        data = input.encode() if input is not None else b""
        proc = await self._open(argv, env, data, merge_stderr=stderr)
        drain_err: asyncio.Task[None] | None = None
        if not stderr:
            # one flow-control window per channel: unread stderr would stall stdout
            async def discard() -> None:
                with contextlib.suppress(Exception):
                    while await proc.stderr.read(_READ_CHUNK):
                        pass

            drain_err = asyncio.create_task(discard())
        try:
            while True:
                try:
                    line = await proc.stdout.readline()
                except (asyncssh.Error, OSError) as e:
                    raise TransportError(f"{self.name}: {argv[0]}: {_describe(e)}") from None
                if not line:
                    break
                yield line.decode(errors="replace").rstrip("\r\n")
            with contextlib.suppress(asyncssh.Error, OSError):
                await proc.wait_closed()
            if proc.exit_status is None and proc.exit_signal is None:
                raise TransportError(f"{self.name}: connection lost while streaming {argv[0]}")
            if proc.exit_status in (126, 127):  # as LocalTransport: a program that cannot start is an error
                why = "not found" if proc.exit_status == 127 else "not executable"
                raise TransportError(f"{self.name}: cannot start {argv[0]!r}: {why}")
        finally:
            if proc.exit_status is None and proc.exit_signal is None:
                proc.close()  # the wrapper sees the channel go and kills the process group
            if drain_err is not None:
                drain_err.cancel()

    # --- port forwarding -------------------------------------------------------------------------------

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """A listener on 127.0.0.1 of our own that opens a direct-tcpip channel on the *current* connection
        per accepted TCP connection: its port survives reconnects, and while the host is down a connection
        to it is closed at once (a health probe fails fast instead of hanging)."""
        key = (remote_host, int(remote_port))
        srv = self._forwards.get(key)
        if srv is not None:
            return int(srv.sockets[0].getsockname()[1])
        self._require_conn()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._pumps.add(task)
            try:
                await self._pump(key, reader, writer)
            except asyncio.CancelledError:
                pass  # close() cancelled it; a cancelled handler task is logged as an error by asyncio
            finally:
                if task is not None:
                    self._pumps.discard(task)

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        self._forwards[key] = srv
        return int(srv.sockets[0].getsockname()[1])

    async def _pump(
        self, key: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        conn = self._conn
        try:
            if conn is None:
                return
            try:
                r_reader, r_writer = await conn.open_connection(key[0], key[1])
            except (asyncssh.Error, OSError):
                return

            async def up() -> None:
                try:
                    while chunk := await reader.read(_READ_CHUNK):
                        r_writer.write(chunk)
                        await r_writer.drain()
                finally:
                    with contextlib.suppress(Exception):
                        r_writer.write_eof()

            async def down() -> None:
                while chunk := await r_reader.read(_READ_CHUNK):
                    writer.write(chunk)
                    await writer.drain()

            t_up = asyncio.create_task(up())
            try:
                with contextlib.suppress(Exception):
                    await down()
            finally:
                t_up.cancel()
                with contextlib.suppress(BaseException):
                    await t_up
                r_writer.close()
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

"""One way to reach a host, whatever carries it: run a command, stream its lines, forward a port.

Commands are argv lists, never shell strings; the SSH transport quotes them for the remote shell so a profile
value stays one literal argument.
"""

from __future__ import annotations

import abc
import shlex
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from ddtree_tui.config import HostProfile
from ddtree_tui.model.snapshot import ConnStatus


class TransportError(Exception):
    """The host could not be reached or the command could not be started (not: the command failed)."""


# The argument and return types every transport's run/stream share (one spelling, not one a transport)
Argv = Sequence[str]
Env = Mapping[str, str] | None
Lines = AsyncGenerator[str, None]


class RunResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    argv: list[str]
    exit_status: int | None  # None when killed by a signal or timed out
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @classmethod
    def finished(
        cls, argv: Argv, status: int | None, out: bytes, err: bytes, started: float, timed_out: bool
    ) -> RunResult:
        """The result of a command that ran (`started`: its time.monotonic() at start); a negative or
        missing status (a signal) and a timeout both read as exit_status None."""
        return cls(
            argv=[str(a) for a in argv],
            exit_status=None if timed_out or status is None or status < 0 else status,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
        )


StateListener = Callable[[ConnStatus], None]


def quote_argv(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """A remote shell command line from an argv list: every element is one literal word."""
    if not argv:
        raise ValueError("empty argv")
    words = [shlex.quote(str(a)) for a in argv]
    if env:
        for k in env:
            if not k.replace("_", "a").isalnum() or k[0].isdigit():
                raise ValueError(f"invalid environment variable name {k!r}")
        words = ["env", *(shlex.quote(f"{k}={v}") for k, v in env.items()), *words]
    return " ".join(words)


class Transport(abc.ABC):
    """The interface every host transport implements."""

    def __init__(self, profile: HostProfile) -> None:
        self.profile = profile
        self._status = ConnStatus(state="connecting", since=time.time())
        self._listeners: list[StateListener] = []

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def status(self) -> ConnStatus:
        return self._status

    def add_listener(self, cb: StateListener) -> None:
        self._listeners.append(cb)

    def _set_status(self, status: ConnStatus) -> None:
        self._status = status
        for cb in list(self._listeners):
            try:
                cb(status)
            except Exception:  # a listener's bug must not take the transport down
                pass

    @abc.abstractmethod
    async def start(self) -> None:
        """Begin connecting (and supervising); returns at once, state changes are published."""

    @abc.abstractmethod
    async def wait_connected(self, timeout: float | None = None) -> bool:
        """True once connected; False when the timeout passes first."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def run(
        self, argv: Argv, *, timeout: float | None = 30.0, input: str | None = None, env: Env = None
    ) -> RunResult:
        """Run argv to completion. Raises TransportError when the host is unreachable."""

    @abc.abstractmethod
    def stream(self, argv: Argv, *, input: str | None = None, env: Env = None, stderr: bool = False) -> Lines:
        """Lines of argv's stdout (and stderr when asked) as they come, without the newline.

        Closing or cancelling the iterator ends the process on the host: nothing is left behind.
        """

    @abc.abstractmethod
    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """A local TCP port that reaches remote_host:remote_port as seen from the host."""

"""A sweep stops, and puts its service back, on SIGTERM, SIGHUP and SIGINT alike.

Python's defaults end the process at once on SIGTERM and SIGHUP (closing the terminal, `tmux kill-window`,
`kill PID`): no `finally` runs, so a sweep left the service on a point's overrides with `restored: null`.
Here each of the three only sets the sweep's stop event on the running loop: the runner stops starting and
measuring, puts the service back (its `finally`) and the caller saves the state with the signal's name. A
second signal does not abandon the restore (SIGKILL does); `on_signal` hears of each one.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from types import TracebackType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class StopOnSignals:
    """`with StopOnSignals(stop, on_signal) as sig:` inside a running loop; `sig.name` is the first signal's
    name (None: none came), `sig.exit_code` the shell's 128 + its number."""

    def __init__(self, stop: asyncio.Event, on_signal: Callable[[str, int], None] | None = None) -> None:
        self.stop = stop
        self.on_signal = on_signal
        self.first: signal.Signals | None = None
        self.count = 0
        self._installed: list[signal.Signals] = []

    @property
    def name(self) -> str | None:
        return self.first.name if self.first is not None else None

    @property
    def exit_code(self) -> int | None:
        return 128 + int(self.first) if self.first is not None else None

    def _handle(self, sig: signal.Signals) -> None:
        self.count += 1
        if self.first is None:
            self.first = sig
        self.stop.set()
        if self.on_signal is not None:
            with contextlib.suppress(Exception):  # a closed terminal (SIGHUP) must not stop the restore
                self.on_signal(sig.name, self.count)

    def __enter__(self) -> StopOnSignals:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self._handle, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such signal
                continue
            self._installed.append(sig)
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        self._installed.clear()

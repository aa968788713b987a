"""A test-only count of the CLI's process starts (issue 24): with `DDTREE_PROC_LOG=FILE` in the environment,
each `ddtree-tui` / `python -m ddtree_tui.cli` process appends one JSON line to FILE when it exits: its pid,
its mode and first words (`argv[1:3]`), the CPU it had used when its handler began (start-up: interpreter, parser,
imports) and at exit, and the modules loaded then. `benchmarks/process_starts.py` reads it (`--log FILE`). A process that runs several command lines
(tests/cli_batch.py calls `main(argv)` for each) writes one line with all their modes; `prog` (argv[0]'s
name) tells a CLI process from a test process that called `main` in itself (a pytest worker).

Unset (always, outside a measurement) nothing is imported or written: `cli.main` only reads the variable.
A process killed by a signal it does not handle writes no line (the simulator handles SIGTERM and does)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import resource
import sys

PROC_LOG_ENV = "DDTREE_PROC_LOG"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class ProcLog:
    """One process's line: `started()` when the handler is about to run, written at interpreter exit."""

    def __init__(self, path: str, argv: list[str]) -> None:
        self.path = path
        self.words = list(argv[1:3])
        self.modes: list[str] = []
        self.start_cpu: float | None = None
        self.start_modules: int | None = None
        atexit.register(self.write)

    def started(self, mode: str) -> None:
        self.modes.append(mode)
        if self.start_cpu is None:  # the first command line of the process: its start-up
            self.start_cpu = _cpu()
            self.start_modules = len(sys.modules)

    def label(self) -> str:
        """The mode; `batch of N` for several command lines; the words for one that ended while parsing."""
        if len(self.modes) > 1:
            return f"batch of {len(self.modes)}"
        return self.modes[0] if self.modes else "parse: " + " ".join(self.words)

    def write(self) -> None:
        line = {
            "pid": os.getpid(),
            "mode": self.label(),
            "modes": self.modes,
            "argv": self.words,
            "prog": os.path.basename(sys.argv[0]) if sys.argv else "",
            "start_cpu_s": self.start_cpu,
            "start_modules": self.start_modules,
            "cpu_s": _cpu(),
            "modules": len(sys.modules),
            # the test that started it (pytest sets this for each test; children inherit it): who pays for it
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0],
        }
        # one short line in one O_APPEND write: lines of concurrent processes do not interleave; a line that
        # cannot be written (a test's file size limit, a full disk) is left out: the count never changes what
        # the process does or prints
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (json.dumps(line) + "\n").encode())
            finally:
                os.close(fd)


_LOG: ProcLog | None = None


def from_env() -> ProcLog | None:
    """This process's hook (one, however many command lines it runs) when `DDTREE_PROC_LOG` names a file."""
    global _LOG
    path = os.environ.get(PROC_LOG_ENV)
    if path and _LOG is None:
        _LOG = ProcLog(path, sys.argv)
    return _LOG

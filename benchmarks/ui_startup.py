"""Time to the TUI's first frame from process start (issue 28: first paint under 1 s), as a user sees it:
`ddtree-tui --profiles DIR` in a pseudo-terminal of 160x48, its imports included. benchmarks/ui.py adds these
rows to its table (and so to `--compare REV --parallel`, where both trees start at the same time); alone:

    .venv/bin/python benchmarks/ui_startup.py                  # 16 hosts, 3 starts
    .venv/bin/python benchmarks/ui_startup.py --hosts 64 --gpus 8 --all-services

The child is the package's own `main()` with a spy on Textual's `App._display` that writes, at the first frame
that reaches the terminal, the wall clock and the process's CPU time (all threads; what an idle core would
wait), and the CPU time when the app began to be built (imports, parser, profiles). Then the time until the
top bar reads `hosts N/N up` (every host connected: the fleet's start, now after the first frame). Then
`q`, and the child's exit is awaited (it stops its fleet); a child that does not leave within 30 s is ended
with its process group (it is ours). Each figure is the median of `runs` starts."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path

BOOT = """import json, sys, time
sys.path.insert(0, {code!r})
from textual.app import App
_first, _init, _built = App._display, App.__init__, []
def _spy(self, screen, renderable):
    if not getattr(_spy, "done", False):
        _spy.done = True
        with open({report!r}, "w") as f:
            json.dump({{"t": time.time(), "cpu": time.process_time(), "before_app_cpu": _built[0]}}, f)
    return _first(self, screen, renderable)
def _app(self, *a, **kw):
    _built.append(time.process_time())
    _init(self, *a, **kw)
App._display, App.__init__ = _spy, _app
from ddtree_tui.cli import main
sys.exit(main())
"""
ANSI = re.compile(rb"\x1b\[[0-9;?<>=$]*[A-Za-z~]|\x1b\][^\x07]*\x07")


def _read(fd: int, buf: bytearray, wait: float) -> bool:
    """Whatever the terminal has within `wait` seconds; False once the child closed it."""
    r, _, _ = select.select([fd], [], [], wait)
    if not r:
        return True
    try:
        chunk = os.read(fd, 1 << 16)
    except OSError:
        return False
    buf += chunk
    return bool(chunk)


def _running(pid: int) -> bool:
    """True while our child has not exited (reaping it once it has)."""
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:  # reaped already
        return False


def one_start(code: Path, profiles: Path, work: Path, hosts: int, timeout: float = 120.0) -> dict[str, float]:
    """One `ddtree-tui --profiles DIR` in a pty: ms to the first frame (wall and CPU), the import CPU, and ms
    until every host is up. NaN for what did not happen within `timeout`."""
    report = work / "first.json"
    report.unlink(missing_ok=True)
    boot = BOOT.format(code=str(code), report=str(report))
    argv = [sys.executable, "-c", boot, "--profiles", str(profiles), "--todos", str(work / "todos.json")]
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48"}
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(work / "xdg")  # no user profiles, history or todos of this machine
    t0 = time.time()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the TUI, in the work folder (its .ddtree/ history goes there)
        os.chdir(work)
        os.execve(sys.executable, argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    out = bytearray()
    up = f"hosts {hosts}/{hosts} up".encode()
    t_up = float("nan")
    try:
        while time.time() - t0 < timeout:
            if not _read(fd, out, 0.02):
                break
            if up in ANSI.sub(b"", bytes(out[-4096:])):
                t_up = time.time()
                break
        first = json.loads(report.read_text()) if report.exists() else {}
        os.write(fd, b"q")
        end = time.time() + 30
        while time.time() < end and _running(pid):
            _read(fd, out, 0.05)
    finally:
        if _running(pid):  # still there: our child and its process group
            os.killpg(pid, signal.SIGTERM)
            time.sleep(2)
            if _running(pid):
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        os.close(fd)
    nan = float("nan")
    return {
        "wall": (first["t"] - t0) * 1000 if first else nan,
        "cpu": first["cpu"] * 1000 if first else nan,
        "before_app": first["before_app_cpu"] * 1000 if first else nan,
        "up": (t_up - t0) * 1000,
    }


def startup_rows(
    code: Path,
    hosts: int,
    gpus: int,
    all_services: bool,
    host_toml: str,
    services_toml: Callable[[], str],
    widen: Callable[[Path, int], str],
    runs: int = 3,
) -> list[tuple[str, str, str]]:
    """The rows benchmarks/ui.py prints: the same profiles as its in-process run (its HOST_TOML, services and
    widened recording), written to files for the child."""
    tmp = Path(tempfile.mkdtemp(prefix="ddtree-ui-startup-"))
    try:
        replay = "h200-under-load" if gpus == 2 else widen(tmp / "replay.jsonl", gpus)
        (tmp / "profiles").mkdir()
        for i in range(hosts):
            text = host_toml.format(name=f"h{i:02d}", workdir=tmp / f"w{i}", replay=replay)
            if i == 0 or all_services:
                text += services_toml()
            (tmp / "profiles" / f"h{i:02d}.toml").write_text(text, encoding="utf-8")
        got = [one_start(code, tmp / "profiles", tmp, hosts) for _ in range(runs)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(key: str) -> float:
        return statistics.median(g[key] for g in got)

    return [
        (
            f"first frame from process start (n={runs})",
            f"{med('wall'):.0f} ms",
            "< 1000 ms (imports included)",
        ),
        ("  process CPU to the first frame", f"{med('cpu'):.0f} ms", "(the wall on an idle core)"),
        ("  of which before the app (imports, profiles)", f"{med('before_app'):.0f} ms", "CPU"),
        (f"all {hosts} hosts up from process start", f"{med('up'):.0f} ms", "(the fleet's start)"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--all-services", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args()
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    import ui  # benchmarks/ui.py: the profiles its in-process run uses

    rows = startup_rows(
        here.parent,
        ns.hosts,
        ns.gpus,
        ns.all_services,
        ui.HOST_TOML,
        ui.services_toml,
        ui.widen_recording,
        ns.runs,
    )
    ui.print_table(rows)


if __name__ == "__main__":
    main()

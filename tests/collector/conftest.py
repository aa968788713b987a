from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.collector.prom import Prometheus, wait_http
from tests.procs import stop_child
from tests.util import free_port


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[list[str]], Prometheus]]:
    """Start a real Prometheus scraping the given targets; stopped at teardown."""
    started: list[Prometheus] = []

    def start(targets: list[str]) -> Prometheus:
        p = Prometheus(tmp_path / f"prom{len(started)}", targets)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


class ServeProc:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> int:
        return stop_child(self.proc, 20)


@pytest.fixture
def serve_demo(tmp_path: Path) -> Iterator[Callable[..., ServeProc]]:
    """`ddtree-tui serve --demo` as a real child process on a free loopback port."""
    procs: list[ServeProc] = []

    def start(*extra: str, port: int | None = None, cwd: Path | None = None) -> ServeProc:
        port = port or free_port()
        work = cwd or tmp_path / f"serve{len(procs)}"
        work.mkdir(exist_ok=True)
        log = work / "serve.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ddtree_tui.cli",
                    "serve",
                    "--demo",
                    "--listen",
                    f"127.0.0.1:{port}",
                    *extra,
                ],
                cwd=work,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            )
        sp = ServeProc(proc, port, log)
        procs.append(sp)
        try:
            wait_http(f"{sp.url}/-/ready", 30, "ddtree-tui serve", proc)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{log.read_text(errors='replace')[-2000:]}") from None
        return sp

    yield start
    for sp in procs:
        sp.stop()

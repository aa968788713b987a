"""What many tests need: free loopback ports, a bounded wait, an SSE body decoded, a loopback HTTP server in a
thread. One copy each (the ports and the wait were written six times, the others twice).

`free_port` is the package's own (ddtree_tui/sim/process.py), so tests and the demo pick ports the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from ddtree_tui.sim.process import free_port

__all__ = [
    "BUSY_SLACK_S",
    "cli_argv",
    "cli_batch",
    "demo_profile",
    "first_lines_then_cancel",
    "free_port",
    "free_ports",
    "port_free",
    "serve_http",
    "sse_chunk",
    "sse_events",
    "sse_socket_server",
    "until",
]


# What a machine busy with other work (or this suite's own parallel workers) may add to a wait that a test
# bounds: such a bound says "ended by its timeout, not a hang", never how accurate a clock is (issue 25).
BUSY_SLACK_S = 5.0


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for outgoing connections and `bind(0)` (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int, avoid: set[int] | None = None) -> list[int]:
    """n distinct free high ports, each with its next neighbour free too (a refused port's suggestion).

    Picked below the kernel's ephemeral range: a port a test binds later (a squatter holding a service's
    port, a service launched on it) must not be taken meanwhile by some other test's outgoing connection,
    which the kernel numbers from that range (seen once: "Address already in use" holding a picked port)."""
    out: list[int] = []
    avoid = set(avoid or ())
    top = min(_ephemeral_low(), 65000) - 2
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(10_000):
        if len(out) >= n:
            return out
        p = rng.randrange(20000, top)
        if p in avoid or p + 1 in avoid or not port_free(p) or not port_free(p + 1):
            continue
        out.append(p)
        avoid.update((p, p + 1))
    raise RuntimeError(f"no {n} free port pairs found between 20000 and {top}")


async def until(
    cond: Callable[[], Any],
    timeout: float,
    what: str,
    tick: float = 0.05,
    detail: Callable[[], Any] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> Any:
    """Poll cond() until it returns something truthy (and return that); AssertionError naming `what` (and
    `detail()`) after the timeout. `sleep`: how to wait between polls (a Textual pilot's pause repaints)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            extra = f"; {detail()}" if detail else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        await sleep(tick)


def sse_events(text: str) -> list[Any]:
    """The `data:` payloads of a whole SSE body, JSON-decoded; the `[DONE]` marker kept as the string."""
    out: list[Any] = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            p = block[6:]
            out.append(p if p == "[DONE]" else json.loads(p))
    return out


@contextlib.contextmanager
def serve_http(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[int]:
    """`handler` served on a free loopback port in a thread (yields the port); shut down on exit."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


@contextlib.contextmanager
def sse_socket_server(n: int) -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback server of plain sockets: each of n connections gets a chunked SSE response head as soon as
    its request arrives, and is appended to the yielded list (in the order accepted); the test writes the
    bodies itself (`sse_chunk`), so it knows to the syscall when each byte left."""
    ls = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    ready = threading.Event()

    def serve() -> None:
        for _ in range(n):
            c, _ = ls.accept()
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(65536)
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = 0
            for h in head.split(b"\r\n"):
                if h.lower().startswith(b"content-length"):
                    length = int(h.split(b":")[1])
            while len(rest) < length:
                rest += c.recv(65536)
            # listed before its head goes out: the client's post() returns on the head, and the test
            # reads this list next
            conns.append(c)
            c.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            )
        ready.set()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        yield ls.getsockname()[1], conns
        # every connection the test meant to make was made (the server's thread may trail post())
        assert ready.wait(10)
    finally:
        for c in conns:
            c.close()
        ls.close()
        th.join(5)


def sse_chunk(payload: bytes) -> bytes:
    """One SSE event as one HTTP/1.1 chunk."""
    ev = b"data: " + payload + b"\n\n"
    return f"{len(ev):x}\r\n".encode() + ev + b"\r\n"


def local_profile(tmp_path: Path, services: list[tuple[str, str, int]]) -> Path:
    """Host `loc` on this machine (its workdir under tmp_path) with dflash services (name, launcher, port)."""
    p = tmp_path / "loc.toml"
    text = f'name = "loc"\naddress = "local"\nworkdir = "{tmp_path / "wd"}"\npython = {json.dumps(sys.executable)}\n'
    for name, launcher, port in services:
        text += (
            f'\n[[service]]\nname = "{name}"\nalgorithm = "dflash"\nlauncher = "{launcher}"\nport = {port}\n'
        )
    p.write_text(text)
    return p


def demo_profile(tmp_path: Path) -> Path:
    """The shipped demo profile with free ports instead of 31010/31011, written into `tmp_path`: two demos
    started at once (parallel test workers, a developer's demo) would otherwise race for the same ports."""
    from ddtree_tui.config import packaged_demo_profile

    text = Path(packaged_demo_profile()).read_text(encoding="utf-8")
    a, b = free_ports(2)
    text = text.replace("port = 31010", f"port = {a}").replace("port = 31011", f"port = {b}")
    p = tmp_path / "local-demo.toml"
    p.write_text(text, encoding="utf-8")
    return p


def cli_argv(*args: str) -> list[str]:
    """The command line of `ddtree-tui ARGS...` in a child process, with this test run's Python."""
    return [sys.executable, "-m", "ddtree_tui.cli", *args]


def cli_batch(
    argvs: list[list[str]], cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """`ddtree-tui ARGV` for each of `argvs`, in order, all in one child process (tests/cli_batch.py: the
    imports paid once, not once a command line); what each returned, printed and wrote to stderr. `env`:
    variables set for the child (and what it starts) on top of this process's environment."""
    script = str(Path(__file__).with_name("cli_batch.py"))
    fd, results = tempfile.mkstemp(prefix="cli-batch-", suffix=".json")  # not in cwd: tests list their dirs
    os.close(fd)
    try:
        p = subprocess.run([sys.executable, script, results], input=json.dumps(argvs), cwd=cwd,
                           capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
        got = json.loads(Path(results).read_text(encoding="utf-8"))
    finally:
        os.unlink(results)
    return [
        subprocess.CompletedProcess(["ddtree-tui", *a], r["returncode"], r["stdout"], r["stderr"])
        for a, r in zip(argvs, got, strict=True)
    ]


async def first_lines_then_cancel(
    lines: AsyncIterator[str], ready: Callable[[], Awaitable[Any]], timeout: float = 10.0
) -> list[str]:
    """Read `lines` in a task; once `ready()` returned and a line came, cancel the task: the lines it read."""
    got: list[str] = []

    async def consume() -> None:
        async for line in lines:
            got.append(line)

    task = asyncio.create_task(consume())
    await ready()
    await until(lambda: got, timeout, "a first line")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return got

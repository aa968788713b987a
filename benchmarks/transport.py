"""What a command costs over SSH, measured against a real OpenSSH sshd on 127.0.0.1 (tests/sshd.py).

    .venv/bin/python benchmarks/transport.py [--spawn N] [--run N] [--line N] [--http N]

Prints a markdown table (median and p90 per operation). It starts its own sshd in a temp dir and points HOME
there, so it never touches your ~/.ssh. The point of the numbers: anything polled every tick (telemetry,
health) must ride a channel or TCP connection that is already open, not open a new session each time.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from ddtree_tui.config import parse_profile
from ddtree_tui.lib import http as lib_http
from ddtree_tui.transport.ssh import SshTransport
from tests.sshd import SshEnv
from tests.util import serve_http

Row = tuple[str, int, list[float]]  # what was measured, how many times, each time in ms


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


async def timed(n: int, fn: Callable[[], Awaitable[object]]) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


class _Ok(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 65536  # one write per response, like uvicorn; unbuffered writes meet Nagle + delayed ACK

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


async def bench(env: SshEnv, args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    argv = env.ssh_argv("testhost")

    def spawn() -> None:
        subprocess.run([*argv, "true"], check=True, stdin=subprocess.DEVNULL)

    loop = asyncio.get_running_loop()
    spawn()  # warm-up
    rows.append(
        (
            "(a) `ssh -o BatchMode=yes testhost true`, a new process + connection each time",
            args.spawn,
            await timed(args.spawn, lambda: loop.run_in_executor(None, spawn)),
        )
    )

    t = SshTransport(parse_profile(env.profile_toml("testhost")))
    await t.start()
    if not await t.wait_connected(10):
        raise SystemExit(f"cannot connect: {t.status.error}")
    try:
        await t.run(["true"])
        rows.append(
            (
                '(b) `await t.run(["true"])`: a new channel on one persistent connection',
                args.run,
                await timed(args.run, lambda: t.run(["true"])),
            )
        )
        conn = t.connection
        assert conn is not None
        rows.append(
            (
                '(b\') raw asyncssh `conn.run("true")`, no kill-on-close wrapper (for comparison)',
                args.run,
                await timed(args.run, lambda: conn.run("true")),
            )
        )
        proc = await conn.create_process("cat")

        async def echo() -> None:
            proc.stdin.write("ping\n")
            assert await proc.stdout.readline() == "ping\n"

        await echo()
        rows.append(
            (
                "(c) one request/response line over an already-open channel (remote `cat`)",
                args.line,
                await timed(args.line, echo),
            )
        )
        proc.close()

        with serve_http(_Ok) as direct:
            rows.append(
                await http_row(
                    "(d0) HTTP GET straight to the server, keep-alive, no ssh (for comparison)",
                    args.http,
                    f"http://127.0.0.1:{direct}/",
                )
            )
            port = await t.forward_port(direct)
            url = f"http://127.0.0.1:{port}/"
            rows.append(
                await http_row(
                    "(d) HTTP GET through `forward_port`, keep-alive (one tunnel channel)", args.http, url
                )
            )
            rows.append(
                await http_row(
                    "(e) HTTP GET through `forward_port`, a new TCP connection (new channel) each",
                    args.http,
                    url,
                    warm=False,
                    new_connection_each=True,
                )
            )
    finally:
        await t.close()
    return rows


def _client(new_connection_each: bool) -> aiohttp.ClientSession:
    if not new_connection_each:
        return lib_http.session(timeout=5)
    return aiohttp.ClientSession(  # lib_http.session's settings over a connector that keeps no connection
        connector=aiohttp.TCPConnector(force_close=True),
        timeout=aiohttp.ClientTimeout(total=5),
        trust_env=False,
    )


async def http_row(label: str, n: int, url: str, warm: bool = True, new_connection_each: bool = False) -> Row:
    """n timed GETs of `url` through one client (after one untimed GET when `warm`): a table row."""
    async with _client(new_connection_each) as c:

        async def get() -> None:
            async with c.get(url) as r:
                await lib_http.read_body(r)

        if warm:
            await get()
        return (label, n, await timed(n, get))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spawn", type=int, default=20)
    ap.add_argument("--run", type=int, default=50)
    ap.add_argument("--line", type=int, default=500)
    ap.add_argument("--http", type=int, default=200)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops our sshd on a kill
    with tempfile.TemporaryDirectory(prefix="ddtree-bench-") as tmp:
        env = SshEnv(Path(tmp))
        os.environ["HOME"] = str(env.home)
        env.add_server("testhost")
        try:
            rows = asyncio.run(bench(env, args))
        finally:
            env.stop()
    print("| operation | N | median ms | p90 ms |")
    print("| --- | ---: | ---: | ---: |")
    for name, n, xs in rows:
        print(f"| {name} | {n} | {statistics.median(xs):.2f} | {pct(xs, 0.9):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

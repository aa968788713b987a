"""This machine, without ssh: asyncio subprocesses, each in its own process group so a cancel ends it all."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence

from ddtree_tui.config import HostProfile
from ddtree_tui.model.snapshot import ConnStatus
from ddtree_tui.transport.base import Argv, Env, Lines, RunResult, Transport, TransportError


def _kill_group(proc: asyncio.subprocess.Process, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class LocalTransport(Transport):
    def __init__(self, profile: HostProfile) -> None:
        super().__init__(profile)

    async def start(self) -> None:
        self._set_status(ConnStatus(state="connected", since=time.time()))

    async def wait_connected(self, timeout: float | None = None) -> bool:
        return self.status.state == "connected"

    async def close(self) -> None:
        return None

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        if not env:
            return None
        return {**os.environ, **{k: str(v) for k, v in env.items()}}

    async def _spawn(
        self, argv: Sequence[str], env: Mapping[str, str] | None, stdin: bool, stderr_to_stdout: bool = False
    ) -> asyncio.subprocess.Process:
        try:
            return await asyncio.create_subprocess_exec(
                *[str(a) for a in argv],
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT if stderr_to_stdout else asyncio.subprocess.PIPE,
                env=self._env(env),
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as e:
            raise TransportError(f"cannot start {argv[0]!r}: {e.strerror}") from None

    async def run(
        self, argv: Argv, *, timeout: float | None = 30.0, input: str | None = None, env: Env = None
    ) -> RunResult:
        t0 = time.monotonic()
        try:
            proc = await self._spawn(argv, env, stdin=input is not None)
        except TransportError as e:
            return RunResult(
                argv=list(argv), exit_status=127, stdout="", stderr=str(e), duration_s=time.monotonic() - t0
            )
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate(input.encode() if input is not None else None)
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
            out, err = b"", b""
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    out, err = await proc.communicate()
        except asyncio.CancelledError:
            _kill_group(proc)
            raise
        rc = proc.returncode
        return RunResult.finished(argv, rc, out, err, t0, timed_out)

    async def stream(
        self, argv: Argv, *, input: str | None = None, env: Env = None, stderr: bool = False
    ) -> Lines:
        proc = await self._spawn(argv, env, stdin=input is not None, stderr_to_stdout=stderr)
        try:
            if input is not None and proc.stdin is not None:
                proc.stdin.write(input.encode())
                await proc.stdin.drain()
                proc.stdin.close()
            assert proc.stdout is not None
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                yield line.decode(errors="replace").rstrip("\r\n")
            await proc.wait()
        finally:
            if proc.returncode is None:
                _kill_group(proc, signal.SIGTERM)
                try:
                    async with asyncio.timeout(2):
                        await proc.wait()
                except (TimeoutError, asyncio.CancelledError):
                    _kill_group(proc)
            else:
                _kill_group(proc)  # children it left behind in its group

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        return remote_port

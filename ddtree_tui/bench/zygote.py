"""Client worker processes forked from one process that has imported the stream client already (a zygote, as
multiprocessing's forkserver), instead of each one starting Python and importing it anew: that start was
~0.3 s of CPU a worker, paid by every run (16 workers at c=256; issue 26).

Where the zygote comes from:
- `--run-bench` forks it before its event loop and before any thread (`fork_zygote`, through the fleet:
  fleet/benchprocs.py), once it has imported the worker's modules itself: the zygote costs a fork.
- Elsewhere (the TUI, the collector: a running loop and threads, where a fork is unsafe) a run's first worker
  starts one as `python -m ddtree_tui.benchworker --zygote`, which imports them once; it ends when the last
  of its workers has.

Each worker is the zygote's child, with three pipes the runner made and sent over the zygote's control socket
(SCM_RIGHTS) as its stdin, stdout and stderr: the same line protocol as an exec'd worker (bench/worker.py).
CPU is counted honestly: the zygote waits for every worker it forked (their CPU is in its getrusage), and we
wait for the zygote (so theirs is in ours). It signals only workers it forked and has not waited for yet
(their pids cannot have been reused): one SIGKILL on our word, and SIGKILL to those still running GRACE_S
after its control socket closed. A worker ends when its stdin closes (the runner closed it, or died); the
zygote ends when its control socket closes (we closed it, or died) and its workers have ended.

DDTREE_BENCH_WORKER_BOOT=exec (or plain, benchworker.py) starts every worker as its own
`python -m ddtree_tui.benchworker`, as before: for a side-by-side measurement.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

BOOT_ENV = "DDTREE_BENCH_WORKER_BOOT"
WORKER_MODULE = "ddtree_tui.benchworker"
ZYGOTE_FLAG = "--zygote"
GRACE_S = 2.0  # after its control socket closed, how long the zygote waits for its workers to end
SPAWN_TIMEOUT_S = 60.0  # an exec'd zygote imports first; on a loaded machine that is seconds
MSG_MAX = 4096


class ZygoteError(RuntimeError):
    """The zygote died, refused, or did not answer."""


def boot_mode() -> str:
    """How a worker process starts: zygote (the default), exec or plain (each its own Python)."""
    mode = os.environ.get(BOOT_ENV) or "zygote"
    return mode if mode in ("exec", "plain") else "zygote"


# --- the zygote's side: no event loop, no thread --------------------------------------------------------


def _noop(signum: int, frame: object) -> None:
    """SIGCHLD's handler: its only job is the wake-up byte (signal.set_wakeup_fd)."""


def serve(ctl: socket.socket, main: Callable[[], None]) -> int:
    """Fork a worker (running `main`) for each `spawn` on `ctl`, wait for every one, say when each exited;
    return once `ctl` has closed and no worker is left."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the runner; it ends us by closing ctl
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # likewise when the terminal goes
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, _noop)
    ctl.setblocking(True)
    kids: set[int] = set()
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    keep = [ctl.fileno(), wake_r, wake_w]
    is_open = True
    deadline = 0.0
    while is_open or kids:
        timeout = None if is_open else max(0, int((deadline - time.monotonic()) * 1000))
        for fd, _ in poller.poll(timeout):
            if fd == wake_r:
                with contextlib.suppress(OSError):
                    while os.read(wake_r, 512):
                        pass
            elif is_open:
                try:
                    msg, fds, _, _ = socket.recv_fds(ctl, MSG_MAX, 3)
                except OSError:
                    msg, fds = b"", []
                if msg:
                    _handle(ctl, msg, fds, kids, keep, main)
                    continue
                for f in fds:
                    os.close(f)
                is_open = False
                poller.unregister(ctl.fileno())
                deadline = time.monotonic() + GRACE_S
        _reap(ctl if is_open else None, kids)
        if not is_open and kids and time.monotonic() >= deadline:
            for pid in kids:
                os.kill(pid, signal.SIGKILL)  # forked here and not waited for yet: ours
            for pid in kids:
                os.waitpid(pid, 0)
            kids.clear()
    return 0


def _send(ctl: socket.socket | None, msg: dict[str, Any]) -> None:
    if ctl is not None:
        with contextlib.suppress(OSError):
            ctl.send(json.dumps(msg).encode())


def _reap(ctl: socket.socket | None, kids: set[int]) -> None:
    while kids:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            kids.clear()
            return
        if pid == 0:
            return
        kids.discard(pid)
        _send(ctl, {"op": "exited", "pid": pid, "rc": os.waitstatus_to_exitcode(status)})


def _handle(
    ctl: socket.socket, raw: bytes, fds: list[int], kids: set[int], keep: list[int], main: Callable[[], None]
) -> None:
    try:
        m = json.loads(raw)
        op = m.get("op")
    except (ValueError, AttributeError):
        op, m = None, {}
    if op == "spawn" and len(fds) == 3:
        pid = os.fork()
        if pid == 0:
            _child(fds, keep, main)
        for f in fds:
            os.close(f)
        kids.add(pid)
        _send(ctl, {"op": "spawned", "id": m.get("id"), "pid": pid})
        return
    for f in fds:
        os.close(f)
    if op == "kill" and m.get("pid") in kids:
        os.kill(m["pid"], signal.SIGKILL)
    elif op == "spawn":
        _send(ctl, {"op": "failed", "id": m.get("id"), "error": f"spawn needs 3 descriptors, got {len(fds)}"})


def _child(fds: list[int], close: list[int], main: Callable[[], None]) -> None:
    """In a newly forked worker: the pipes become fds 0, 1, 2, the zygote's own are closed, signals are a
    plain process's again; then the worker's `main`. Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for i, f in enumerate(fds):
            os.dup2(f, i)
        for f in {*fds, *close}:
            if f > 2:
                os.close(f)
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def serve_stdin(main: Callable[[], None]) -> int:
    """`python -m ddtree_tui.benchworker --zygote`: the control socket is this process's stdin; `main` (the
    worker's, bench/worker.py forked_main) was imported before, once for every fork."""
    fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return serve(socket.socket(fileno=fd), main)


# --- the runner's side ----------------------------------------------------------------------------------


def _reading(reader: asyncio.StreamReader) -> Callable[[], asyncio.StreamReaderProtocol]:
    return lambda: asyncio.StreamReaderProtocol(reader)


class ForkedProcess:
    """A worker the zygote forked, with asyncio.subprocess.Process's part that Worker uses."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._exited = asyncio.get_running_loop().create_future()

    async def _connect(self, in_w: int, out_r: int, err_r: int, limit: int) -> None:
        loop = asyncio.get_running_loop()
        readers = []
        for f in (out_r, err_r):
            reader = asyncio.StreamReader(limit=limit, loop=loop)
            await loop.connect_read_pipe(_reading(reader), os.fdopen(f, "rb", 0))
            readers.append(reader)
        self.stdout, self.stderr = readers
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(in_w, "wb", 0)
        )
        self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)

    def _ended(self, rc: int) -> None:
        self.returncode = rc
        if not self._exited.done():
            self._exited.set_result(rc)

    async def wait(self) -> int:
        """Its exit code, once the zygote has waited for it."""
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        """SIGKILL, sent by the zygote (it alone knows the pid is still its unwaited child)."""
        if self.returncode is None:
            self.zygote.kill(self.pid)


class Zygote:
    """Our handle on one zygote: its control socket, the workers it forked for us, and how it ends."""

    def __init__(self, ctl: socket.socket, *, pid: int | None = None, held: bool = False) -> None:
        self.ctl = ctl
        self.ctl.setblocking(False)
        self.pid = pid  # forked by fork_zygote: waited for by end_forked
        self.proc: asyncio.subprocess.Process | None = None  # exec'd: waited for by settle
        self.held = held  # kept until its owner ends it (the CLI's run), not at its last worker
        self.procs: dict[int, ForkedProcess] = {}
        self.spawning: dict[int, asyncio.Future[int]] = {}
        self.lost = False
        self._next = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def _attach(self) -> None:
        """Read the zygote's replies on the running loop (a new loop takes it over)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.ctl.fileno())
        loop.add_reader(self.ctl.fileno(), self._readable)
        self._loop = loop

    def _readable(self) -> None:
        try:
            data = self.ctl.recv(MSG_MAX)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._lose()
            return
        m = json.loads(data)
        op = m.get("op")
        if op == "spawned":
            fut = self.spawning.pop(m["id"], None)
            if fut is not None and not fut.done():
                fut.set_result(int(m["pid"]))
        elif op == "failed":
            fut = self.spawning.pop(m["id"], None)
            if fut is not None and not fut.done():
                fut.set_exception(ZygoteError(str(m.get("error"))))
        elif op == "exited":
            p = self.procs.pop(int(m["pid"]), None)
            if p is not None:
                p._ended(int(m["rc"]))

    def _lose(self) -> None:
        """The zygote is gone: every worker it forked is too (it waits for them before it exits)."""
        self.lost = True
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.ctl.fileno())
        for fut in self.spawning.values():
            if not fut.done():
                fut.set_exception(ZygoteError("the worker zygote exited"))
        self.spawning.clear()
        for p in self.procs.values():
            p._ended(-signal.SIGKILL)
        self.procs.clear()

    async def spawn(self, limit: int) -> ForkedProcess:
        """A new worker process, its stdin, stdout and stderr pipes ours."""
        if self.lost or self._closed:
            raise ZygoteError("the worker zygote is gone")
        self._attach()
        self._next += 1
        sid = self._next
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.spawning[sid] = fut
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ours = [in_w, out_r, err_r]
        try:
            try:
                socket.send_fds(
                    self.ctl, [json.dumps({"op": "spawn", "id": sid}).encode()], [in_r, out_w, err_w]
                )
            except OSError as e:
                raise ZygoteError(f"the worker zygote is gone: {e}") from e
            finally:
                for f in (in_r, out_w, err_w):
                    os.close(f)
            async with asyncio.timeout(SPAWN_TIMEOUT_S):
                pid = await fut
            p = ForkedProcess(self, pid)
            self.procs[pid] = p
            await p._connect(in_w, out_r, err_r, limit)
            ours = []
            return p
        finally:
            self.spawning.pop(sid, None)
            for f in ours:
                os.close(f)

    def kill(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            self.ctl.send(json.dumps({"op": "kill", "pid": pid}).encode())

    def _close_ctl(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.ctl.fileno())
        self.ctl.close()

    async def settle(self) -> None:
        """An exec'd zygote with no worker left ends here (we wait for it: its CPU and its workers' are
        counted in ours); a held one stays for its owner."""
        global _lazy
        if self.held or self.procs or self.spawning:
            return
        if _lazy is self:
            _lazy = None
        self._close_ctl()
        if self.proc is not None and self.proc.returncode is None:
            try:
                async with asyncio.timeout(GRACE_S + 3):
                    await self.proc.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()  # ours
                await self.proc.wait()


_shared: Zygote | None = None  # forked by fork_zygote (the CLI's), held until end_forked
_lazy: Zygote | None = None  # exec'd for a run's workers, ended by settle when they have ended
_lazy_start: asyncio.Task[Zygote] | None = None  # its start, awaited by every worker started meanwhile


async def _exec_zygote() -> Zygote:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            WORKER_MODULE,
            ZYGOTE_FLAG,
            stdin=theirs.fileno(),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    z = Zygote(ours)
    z.proc = proc
    return z


async def spawn_worker(limit: int) -> ForkedProcess:
    """A worker forked from the CLI's zygote where there is one, else from a run's exec'd zygote (one for
    the workers a run starts together: the first starts it, the others wait for it)."""
    global _lazy, _lazy_start
    if _shared is not None and not _shared.lost:
        return await _shared.spawn(limit)
    if _lazy is None or _lazy.lost or _lazy._closed:
        loop = asyncio.get_running_loop()
        if _lazy_start is None or _lazy_start.get_loop() is not loop:
            _lazy_start = loop.create_task(_exec_zygote())
        start = _lazy_start
        try:
            z = await asyncio.shield(start)
        finally:
            if _lazy_start is start and start.done():
                _lazy_start = None
        if _lazy is None or _lazy.lost or _lazy._closed:
            _lazy = z
    z = _lazy
    try:
        return await z.spawn(limit)
    except BaseException:
        await z.settle()
        raise


def fork_zygote(main: Callable[[], None]) -> bool:
    """Fork the CLI's zygote now, from this process (it must have no other thread and no event loop yet),
    to fork workers that run `main` (imported by the caller before: what every fork shares). False when it
    may not (a thread, a running loop, a BOOT_ENV other than zygote): workers then start as before."""
    global _shared
    if _shared is not None or boot_mode() != "zygote" or threading.active_count() > 1:
        return False
    with contextlib.suppress(RuntimeError):
        asyncio.get_running_loop()
        return False
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()  # nothing buffered here is written twice
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ours.close()
            code = serve(theirs, main)
        except BaseException:
            with contextlib.suppress(BaseException):
                traceback.print_exc()
        finally:
            os._exit(code)
    theirs.close()
    _shared = Zygote(ours, pid=pid, held=True)
    return True


def end_forked() -> None:
    """After the CLI's loop: close the zygote's control socket and wait for it (its workers have ended by
    then, or it kills them after GRACE_S); SIGKILL to it, ours, if it has not ended a while after that."""
    global _shared
    z, _shared = _shared, None
    if z is None or z.pid is None:
        return
    z._close_ctl()
    end = time.monotonic() + GRACE_S + 3
    while time.monotonic() < end:
        pid, _ = os.waitpid(z.pid, os.WNOHANG)
        if pid:
            return
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(z.pid, signal.SIGKILL)
    os.waitpid(z.pid, 0)


@contextlib.contextmanager
def forked_zygote(main: Callable[[], None], wanted: bool = True) -> Iterator[bool]:
    """`fork_zygote(main)` for the length of the block (when `wanted`), `end_forked` after it: whether it
    forked."""
    forked = wanted and fork_zygote(main)
    try:
        yield forked
    finally:
        if forked:
            end_forked()

"""Per-host telemetry: one long-lived sampler per host, faults as state, restarts with backoff.

- This machine (LocalTransport, source auto/nvml): NVML in-process, handles kept, every call in a thread.
- A remote host: ONE process over ONE channel — the sampler program (ddtree_tui/remote/sampler.py, sent as `python -u -c
  <source>`) printing a JSON line per tick; if the host has no usable Python, a POSIX sh loop of one-shot
  nvidia-smi + /proc reads. A sampler that exits or stays silent for more than `stall_intervals` ticks is a
  fault on screen (with the time it started) and is restarted with exponential backoff.
- "replay": a recording played in a loop, labelled as a replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ddtree_tui.config import HostProfile
from ddtree_tui.model.snapshot import GpuSample, HostSample, TelemetryStatus
from ddtree_tui.remote import source
from ddtree_tui.remote.smi import parse_help_fields, pick_fields
from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.telemetry.history import GpuHistory
from ddtree_tui.telemetry.host import LocalHostStats
from ddtree_tui.telemetry.nvml import NvmlUnavailable, nvml_line, open_nvml
from ddtree_tui.telemetry.replay import BUILTIN, ReplayError, load_recording
from ddtree_tui.telemetry.shell_sampler import ShellParser, shell_argv
from ddtree_tui.transport.base import Transport, TransportError

log = logging.getLogger(__name__)

SAMPLER_PROGRAM: str = source("sampler")  # ddtree_tui/remote/sampler.py
Update = tuple[HostSample | None, list[GpuSample], TelemetryStatus]
OnUpdate = Callable[[HostSample | None, list[GpuSample], TelemetryStatus], None]

_NO_PYTHON_RE = re.compile(r"not found|No such file|cannot execute|SyntaxError|Permission denied", re.I)
_MODES = {"auto": "auto", "nvml": "nvml", "nvidia-smi": "nvidia-smi", "none": "none"}


def is_local(transport: Transport, profile: HostProfile) -> bool:
    from ddtree_tui.transport.local import LocalTransport

    return isinstance(transport, LocalTransport) or profile.is_local


def program_argv(profile: HostProfile, interval_s: float, *, mode: str = "auto", count: int = 0,
                 backoff_max_s: float = 30.0) -> list[str]:  # fmt: skip
    """argv of the sampler program on the host; the program text is one argv element (quoted by the transport)."""
    argv = [
        profile.python, "-u", "-c", SAMPLER_PROGRAM,
        "--interval-ms", str(max(50, int(interval_s * 1000))),
        "--mode", mode,
        "--workdir", profile.workdir,
        "--backoff-max-ms", str(int(backoff_max_s * 1000)),
    ]  # fmt: skip
    if count:
        argv += ["--count", str(count)]
    return argv


def _json_line(line: str) -> dict[str, Any] | None:
    s = line.strip()
    if not s.startswith("{"):
        return None
    try:
        d = json.loads(s)
    except ValueError:
        return None
    return d if isinstance(d, dict) and "v" in d else None


class HostTelemetry:
    """The telemetry of one host; `run()` until cancelled, updates through `on_update` once per tick."""

    def __init__(
        self,
        transport: Transport,
        profile: HostProfile,
        *,
        on_update: OnUpdate,
        interval: float | None = None,
        history_len: int = 600,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        stall_intervals: float = 3.0,
        startup_grace: float = 10.0,
    ) -> None:
        self.transport = transport
        self.profile = profile
        self.on_update = on_update
        self.interval = float(interval if interval is not None else profile.telemetry.interval_ms / 1000.0)
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.stall_intervals = stall_intervals
        self.startup_grace = startup_grace
        self._history = GpuHistory(history_len)
        self._builder = FrameBuilder()
        self._service_pids: dict[int, str] = {}
        self.restarts = 0  # how many times the sampler was (re)started after a fault; for tests and the UI
        self.mode_used: str | None = None  # "nvml-local", "program", "shell", "replay", "host-only"
        self.last: Update | None = None
        # True from the first update that says something definite about the GPUs: rows, a fault, "no GPU",
        # telemetry off. A stream's first line is often `stale` (nvidia-smi has not printed yet): not that.
        self.settled = False

    @property
    def history(self) -> GpuHistory:
        return self._history

    def set_service_pids(self, pids: dict[int, str]) -> None:
        """pid → our service name; a GPU process whose pid (or an ancestor's) is here is marked with it."""
        self._service_pids = dict(pids)
        self._builder.set_service_pids(self._service_pids)

    # --- publishing --------------------------------------------------------------------------------------

    def _publish(self, update: Update, record: bool = True, settles: bool = True) -> None:
        host, gpus, status = update
        if record:
            self._history.add(gpus)
        self.last = update
        if settles or gpus or status.fault:
            self.settled = True
        try:
            self.on_update(host, gpus, status)
        except Exception:  # the listener's bug must not stop the sampler
            log.exception("telemetry on_update failed for %s", self.profile.name)

    def _emit(self, line: Mapping[str, Any]) -> None:
        self._publish(self._builder.build(line), record=not line.get("stale"), settles=not line.get("stale"))

    async def _ticks(self) -> Any:
        """Ticks at a steady rate that never pile up: a late tick is skipped, not made up."""
        next_at = time.monotonic()
        while True:
            yield
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
                delay = 0
            await asyncio.sleep(delay)

    # --- run ---------------------------------------------------------------------------------------------

    async def run(self) -> None:
        src = self.profile.telemetry.source
        if src == "replay":
            await self._run_replay()
            return
        if src == "prometheus":
            await self._run_prometheus()
            return
        if is_local(self.transport, self.profile):
            if src == "none":
                await self._run_host_only("GPU telemetry off in the profile")
                return
            if src in ("auto", "nvml") and await self._run_local_nvml():
                return
        await self._run_stream(_MODES.get(src, "auto") if src != "nvml" or not self._local else "nvidia-smi")

    @property
    def _local(self) -> bool:
        return is_local(self.transport, self.profile)

    async def _run_host_only(self, note: str) -> None:
        self.mode_used = "host-only"
        stats = LocalHostStats(self.profile.workdir)
        self._builder = FrameBuilder(note=note)
        self._builder.set_service_pids(self._service_pids)
        async for _ in self._ticks():
            host = await asyncio.to_thread(stats.sample)
            self._emit({"v": 1, "src": "none", "host": host.model_dump(exclude={"ts"})})

    async def _run_local_nvml(self) -> bool:
        """NVML in-process. False when NVML cannot be imported/initialised for a reason other than "no GPU"
        (then the caller tries nvidia-smi); runs forever otherwise."""
        stats = LocalHostStats(self.profile.workdir)
        backoff = self.backoff_initial
        while True:
            try:
                coll = await asyncio.to_thread(open_nvml)
            except NvmlUnavailable as e:
                if e.no_gpu:
                    await self._run_host_only("no NVIDIA GPU")
                    return True
                if self.restarts == 0:
                    log.info("%s: local NVML unusable (%s); trying nvidia-smi", self.profile.name, e)
                    return False
                self._publish(self._builder.stalled(f"NVML: {e}"), record=False)
                self.restarts += 1
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max)
                continue
            self.mode_used = "nvml-local"

            def tick(c: Any = coll) -> dict[str, Any]:
                line = nvml_line(c)
                line["host"] = stats.sample().model_dump(exclude={"ts"})
                return line

            try:
                async for _ in self._ticks():
                    line = await asyncio.to_thread(tick)
                    self._emit(line)
                    if line.get("err"):  # NVML itself failed: re-initialise after a pause
                        break
                    backoff = self.backoff_initial
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(coll.close)
            self.restarts += 1
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.backoff_max)

    async def _run_replay(self) -> None:
        self.mode_used = "replay"
        try:
            frames, note = load_recording(self.profile.telemetry.replay)
        except ReplayError as e:
            self._builder = FrameBuilder(source_override="replay")
            self._publish(self._builder.stalled(str(e)), record=False)
            await asyncio.Event().wait()  # nothing to play; stay (cancellable) like any sampler
            return
        self._builder = FrameBuilder(source_override="replay", note=note)
        self._builder.set_service_pids(self._service_pids)
        stats = LocalHostStats(self.profile.workdir) if self._local else None
        # the built-in demo recording follows the (simulated) services: its idle part while none of this
        # host's services runs, its under-load part while one does; a recording of the user's own plays as
        # it was recorded (a post-mortem must not be rearranged)
        follow = (self.profile.telemetry.replay or "h200-under-load") in BUILTIN
        idle = [f for f in frames if not _busy(f)] if follow else []
        busy = [f for f in frames if _busy(f)] if follow else []
        i = 0
        async for _ in self._ticks():
            part = (busy if self._service_pids else idle) if idle and busy else frames
            frame = dict(part[i % len(part)])
            i += 1
            if stats is not None:
                frame["host"] = (await asyncio.to_thread(stats.sample)).model_dump(exclude={"ts"})
            self._emit(frame)

    async def _run_prometheus(self) -> None:
        """DCGM-exporter series from a Prometheus server (no host sampler): one query per tick shared by
        every host that reads from the same server."""
        from ddtree_tui.telemetry.prometheus import DcgmFrames, PrometheusError, shared_poller

        self.mode_used = "prometheus"
        value = self.profile.telemetry.host_value or self.profile.name
        frames = DcgmFrames(value)
        poller = shared_poller(self.profile, self.interval)
        q = poller.subscribe(value)
        try:
            while True:
                got = await q.get()
                if isinstance(got, PrometheusError):
                    gpus, status = frames.failed(str(got))
                else:
                    series, identity = got
                    gpus, status = frames.build(series, info=identity)
                self._publish((None, gpus, status), record=status.fault is None)
        finally:
            poller.unsubscribe(value, q)

    async def _shell_fields(self) -> list[str]:
        try:
            res = await self.transport.run(
                ["nvidia-smi", "--help-query-gpu"], timeout=15, env=self.profile.env or None
            )
        except TransportError:
            return pick_fields(None)
        return pick_fields(parse_help_fields(res.stdout) if res.ok else None)

    async def _run_stream(self, mode: str) -> None:
        backoff = self.backoff_initial
        use_shell = False
        while True:
            if not await self.transport.wait_connected(timeout=max(self.interval, backoff)):
                self._publish(
                    self._builder.stalled(
                        f"host not connected: {self.transport.status.error or ''}".strip(" :")
                    ),
                    record=False,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max)
                continue
            parser: ShellParser | None = None
            if use_shell:
                fields = await self._shell_fields()
                parser = ShellParser(fields)
                argv = shell_argv(self.profile.workdir, fields, self.interval)
                self.mode_used = "shell"
            else:
                argv = program_argv(self.profile, self.interval, mode=mode, backoff_max_s=self.backoff_max)
                self.mode_used = "program"
            lines, healthy_s, reason, text = await self._consume(argv, parser)
            if lines == 0 and not use_shell and _NO_PYTHON_RE.search(text):
                log.info(
                    "%s: %s unusable (%s); falling back to a sh loop",
                    self.profile.name,
                    self.profile.python,
                    text[-200:],
                )
                use_shell = True
                continue
            if healthy_s > 10 * self.interval:
                backoff = self.backoff_initial
            self.restarts += 1
            self._publish(self._builder.stalled(reason), record=False)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.backoff_max)

    async def _consume(self, argv: list[str], parser: ShellParser | None) -> tuple[int, float, str, str]:
        """Read one sampler stream until it ends or stalls: (lines, seconds healthy, why it ended, other text)."""
        started = last = time.monotonic()
        count = 0
        other: deque[str] = deque(maxlen=20)
        agen = self.transport.stream(argv, env=self.profile.env or None, stderr=True)

        async def reader() -> None:
            nonlocal last, count
            async for raw in agen:
                frame = parser.feed(raw) if parser is not None else _json_line(raw)
                if frame is None:
                    if parser is None and raw.strip():
                        other.append(raw.strip())
                    elif parser is not None:
                        last = time.monotonic()
                    continue
                last = time.monotonic()
                count += 1
                self._emit(frame)

        task = asyncio.create_task(reader())
        try:
            while True:
                limit = self.stall_intervals * self.interval + (self.startup_grace if count == 0 else 0.0)
                wait = max(0.02, last + limit - time.monotonic())
                done, _ = await asyncio.wait({task}, timeout=wait)
                if task in done:
                    exc = task.exception()
                    tail = other[-1] if other else ""
                    if exc is not None:
                        reason = f"sampler stream failed: {exc}"
                    else:
                        reason = f"sampler exited{': ' + tail if tail else ''}"
                    return count, last - started, reason, "\n".join(other)
                silent = time.monotonic() - last
                if silent > limit:
                    return (
                        count,
                        last - started,
                        f"sampler not answering for {silent:.0f} s",
                        "\n".join(other),
                    )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            with contextlib.suppress(Exception):
                await agen.aclose()


async def snapshot_once(transport: Transport, profile: HostProfile, timeout: float = 8.0) -> Update:
    """One sample of a host, for `status`: never raises for a host problem, the status says what went wrong."""
    src = profile.telemetry.source
    now = time.time()
    local = is_local(transport, profile)
    try:
        async with asyncio.timeout(timeout):
            return await _snapshot(transport, profile, src, local, timeout)
    except TimeoutError:
        return None, [], TelemetryStatus(fault=f"no telemetry within {timeout:g} s", fault_at=now)
    except TransportError as e:
        return None, [], TelemetryStatus(fault=str(e), fault_at=now)


async def _snapshot(
    transport: Transport, profile: HostProfile, src: str, local: bool, timeout: float
) -> Update:
    if src == "prometheus":
        import httpx

        from ddtree_tui.telemetry.prometheus import DcgmFrames, read_once

        async with httpx.AsyncClient() as client:
            gpus, status = await read_once(
                profile, client, DcgmFrames(profile.telemetry.host_value or profile.name), timeout
            )
        return None, gpus, status
    if src == "replay":
        try:
            frames, note = load_recording(profile.telemetry.replay)
        except ReplayError as e:
            return None, [], TelemetryStatus(source="replay", fault=str(e), fault_at=time.time())
        frame = dict(frames[0])
        if local:
            frame["host"] = (await _local_host(profile)).model_dump(exclude={"ts"})
        return FrameBuilder(source_override="replay", note=note).build(frame)
    if local and src in ("auto", "nvml", "none"):
        host = await _local_host(profile)
        if src == "none":
            line: dict[str, Any] = {"v": 1, "src": "none", "note": "GPU telemetry off in the profile"}
        else:

            def once() -> dict[str, Any] | None:
                try:
                    coll = open_nvml()
                except NvmlUnavailable as e:
                    return {"v": 1, "src": "none", "note": "no NVIDIA GPU"} if e.no_gpu else None
                try:
                    return nvml_line(coll)
                finally:
                    coll.close()

            got = await asyncio.to_thread(once)
            if got is None:
                return await _snapshot_program(transport, profile, "nvidia-smi", timeout)
            line = got
        line["host"] = host.model_dump(exclude={"ts"})
        return FrameBuilder().build(line)
    mode = _MODES.get(src, "auto")
    if local and mode == "nvml":
        mode = "nvidia-smi"
    return await _snapshot_program(transport, profile, mode, timeout)


async def _local_host(profile: HostProfile) -> HostSample:
    def work() -> HostSample:
        stats = LocalHostStats(profile.workdir)
        time.sleep(0.1)  # CPU % is measured between two reads
        return stats.sample()

    return await asyncio.to_thread(work)


async def _snapshot_program(transport: Transport, profile: HostProfile, mode: str, timeout: float) -> Update:
    argv = program_argv(profile, 0.2, mode=mode, count=1)
    res = await transport.run(argv, timeout=timeout, env=profile.env or None)
    frame = next((f for f in map(_json_line, reversed(res.stdout.splitlines())) if f), None)
    if frame is not None:
        return FrameBuilder().build(frame)
    text = (res.stderr or res.stdout).strip()
    if res.exit_status == 127 or _NO_PYTHON_RE.search(text):
        fields = pick_fields(None)
        help_res = await transport.run(
            ["nvidia-smi", "--help-query-gpu"], timeout=timeout, env=profile.env or None
        )
        if help_res.ok:
            fields = pick_fields(parse_help_fields(help_res.stdout))
        sh = await transport.run(shell_argv(profile.workdir, fields, 0.2, count=2), timeout=timeout)
        parser = ShellParser(fields)
        frames = [f for f in map(parser.feed, sh.stdout.splitlines()) if f]
        if frames:
            return FrameBuilder().build(frames[-1])
        text = (sh.stderr or sh.stdout).strip() or text
    tail = text.splitlines()[-1] if text else f"exit status {res.exit_status}"
    return None, [], TelemetryStatus(fault=f"sampler failed: {tail}", fault_at=time.time())


def _busy(frame: dict[str, Any]) -> bool:
    """A recorded frame where a GPU holds a model (more than 1 GB in use)."""
    return any((g.get("mem_used_mb") or 0) > 1000 for g in frame.get("gpus") or [] if isinstance(g, dict))

"""The host's own GPU readers, as one telemetry source for the kinds auto, nvml, nvidia-smi and none.

- This machine (LocalTransport, kind auto/nvml): NVML in-process, handles kept, every call in a thread; if NVML
  cannot be used for a reason other than "no GPU", the sampler program in nvidia-smi mode.
- A remote host: ONE process over ONE channel — the sampler program (ddtree_tui/remote/sampler.py, sent as
  `python -u -c <source>`) printing a JSON line per tick; if the host has no usable Python, a POSIX sh loop of
  one-shot nvidia-smi + /proc reads. A sampler that exits or stays silent for more than `stall_intervals` ticks
  is a fault on screen (with the time it started) and is restarted with exponential backoff.
- kind none on this machine: the host's CPU/memory only, "GPU telemetry off in the profile".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import deque
from typing import Any

from ddtree_tui.config import HostProfile
from ddtree_tui.lib.jsontypes import JsonObject
from ddtree_tui.model.snapshot import HostSample, TelemetryStatus
from ddtree_tui.remote import source
from ddtree_tui.remote.smi import parse_help_fields, pick_fields
from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.telemetry.host import LocalHostStats
from ddtree_tui.telemetry.nvml import NvmlUnavailable, nvml_line, open_nvml
from ddtree_tui.telemetry.shell_sampler import ShellParser, shell_argv
from ddtree_tui.telemetry.source import TelemetrySink, Update
from ddtree_tui.transport.base import Transport, TransportError

log = logging.getLogger(__name__)

SAMPLER_PROGRAM: str = source("sampler")  # ddtree_tui/remote/sampler.py
_NO_PYTHON_RE = re.compile(r"not found|No such file|cannot execute|SyntaxError|Permission denied", re.I)
KINDS = ("auto", "nvml", "nvidia-smi", "none")


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
    """A sampler-protocol line, or None for anything else the host printed."""
    s = line.strip()
    if not s.startswith("{"):
        return None
    try:
        d = json.loads(s)
    except ValueError:
        return None
    return d if isinstance(d, dict) and "v" in d else None


class HostSamplerSource:
    """kinds auto, nvml, nvidia-smi, none: NVML here, the sampler program (or its sh fallback) over the
    transport elsewhere."""

    def __init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"HostSamplerSource reads {', '.join(KINDS)}, not {kind!r}")
        self.kind = kind

    def _program_mode(self, local: bool) -> str:
        # on this machine nvml was tried in-process already: the program reads nvidia-smi
        return "nvidia-smi" if local and self.kind == "nvml" else self.kind

    # --- running -----------------------------------------------------------------------------------------

    async def run(self, sink: TelemetrySink) -> None:
        if sink.local:
            if self.kind == "none":
                await self._run_host_only(sink, "GPU telemetry off in the profile")
                return
            if self.kind in ("auto", "nvml") and await self._run_local_nvml(sink):
                return
        await self._run_stream(sink, self._program_mode(sink.local))

    async def _run_host_only(self, sink: TelemetrySink, note: str) -> None:
        sink.mode_used = "host-only"
        stats = LocalHostStats(sink.profile.workdir)
        sink.use_builder(FrameBuilder(note=note))
        async for _ in sink.ticks():
            host = await asyncio.to_thread(stats.sample)
            sink.emit({"v": 1, "src": "none", "host": host.model_dump(exclude={"ts"})})

    async def _run_local_nvml(self, sink: TelemetrySink) -> bool:
        """NVML in-process. False when NVML cannot be imported/initialised for a reason other than "no GPU"
        (then the caller tries nvidia-smi); runs forever otherwise."""
        stats = LocalHostStats(sink.profile.workdir)
        backoff = sink.backoff_initial
        while True:
            try:
                coll = await asyncio.to_thread(open_nvml)
            except NvmlUnavailable as e:
                if e.no_gpu:
                    await self._run_host_only(sink, "no NVIDIA GPU")
                    return True
                if sink.restarts == 0:
                    log.info("%s: local NVML unusable (%s); trying nvidia-smi", sink.profile.name, e)
                    return False
                sink.stalled(f"NVML: {e}")
                sink.restarts += 1
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, sink.backoff_max)
                continue
            sink.mode_used = "nvml-local"

            def tick(c: Any = coll) -> dict[str, Any]:
                line = nvml_line(c)
                line["host"] = stats.sample().model_dump(exclude={"ts"})
                return line

            try:
                async for _ in sink.ticks():
                    line = await asyncio.to_thread(tick)
                    sink.emit(line)
                    if line.get("err"):  # NVML itself failed: re-initialise after a pause
                        break
                    backoff = sink.backoff_initial
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(coll.close)
            sink.restarts += 1
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, sink.backoff_max)

    async def _shell_fields(self, sink: TelemetrySink) -> list[str]:
        try:
            res = await sink.transport.run(
                ["nvidia-smi", "--help-query-gpu"], timeout=15, env=sink.profile.env or None
            )
        except TransportError:
            return pick_fields(None)
        return pick_fields(parse_help_fields(res.stdout) if res.ok else None)

    async def _run_stream(self, sink: TelemetrySink, mode: str) -> None:
        backoff = sink.backoff_initial
        use_shell = False
        while True:
            if not await sink.transport.wait_connected(timeout=max(sink.interval, backoff)):
                sink.stalled(f"host not connected: {sink.transport.status.error or ''}".strip(" :"))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, sink.backoff_max)
                continue
            parser: ShellParser | None = None
            if use_shell:
                fields = await self._shell_fields(sink)
                parser = ShellParser(fields)
                argv = shell_argv(sink.profile.workdir, fields, sink.interval)
                sink.mode_used = "shell"
            else:
                argv = program_argv(sink.profile, sink.interval, mode=mode, backoff_max_s=sink.backoff_max)
                sink.mode_used = "program"
            lines, healthy_s, reason, text = await _consume(sink, argv, parser)
            if lines == 0 and not use_shell and _NO_PYTHON_RE.search(text):
                log.info(
                    "%s: %s unusable (%s); falling back to a sh loop",
                    sink.profile.name,
                    sink.profile.python,
                    text[-200:],
                )
                use_shell = True
                continue
            if healthy_s > 10 * sink.interval:
                backoff = sink.backoff_initial
            sink.restarts += 1
            sink.stalled(reason)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, sink.backoff_max)

    # --- one sample --------------------------------------------------------------------------------------

    async def once(self, transport: Transport, profile: HostProfile, timeout: float) -> Update:
        local = is_local(transport, profile)
        if not local or self.kind == "nvidia-smi":
            return await _snapshot_program(transport, profile, self._program_mode(local), timeout)
        host = await _local_host(profile)
        if self.kind == "none":
            line: dict[str, Any] = {"v": 1, "src": "none", "note": "GPU telemetry off in the profile"}
        else:

            def nvml_once() -> dict[str, Any] | None:
                try:
                    coll = open_nvml()
                except NvmlUnavailable as e:
                    return {"v": 1, "src": "none", "note": "no NVIDIA GPU"} if e.no_gpu else None
                try:
                    return nvml_line(coll)
                finally:
                    coll.close()

            got = await asyncio.to_thread(nvml_once)
            if got is None:
                return await _snapshot_program(transport, profile, "nvidia-smi", timeout)
            line = got
        line["host"] = host.model_dump(exclude={"ts"})
        return FrameBuilder().build(line)


async def _consume(
    sink: TelemetrySink, argv: list[str], parser: ShellParser | None
) -> tuple[int, float, str, str]:
    """Read one sampler stream until it ends or stalls: (lines, seconds healthy, why it ended, other text)."""
    started = last = time.monotonic()
    count = 0
    other: deque[str] = deque(maxlen=20)
    agen = sink.transport.stream(argv, env=sink.profile.env or None, stderr=True)

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
            sink.emit(frame)

    task = asyncio.create_task(reader())
    try:
        while True:
            limit = sink.stall_intervals * sink.interval + (sink.startup_grace if count == 0 else 0.0)
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
                return count, last - started, f"sampler not answering for {silent:.0f} s", "\n".join(other)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        with contextlib.suppress(Exception):
            await agen.aclose()


async def _local_host(profile: HostProfile) -> HostSample:
    def work() -> HostSample:
        stats = LocalHostStats(profile.workdir)
        time.sleep(0.1)  # CPU % is measured between two reads
        return stats.sample()

    return await asyncio.to_thread(work)


async def local_host_line(profile: HostProfile) -> JsonObject:
    """This machine's CPU/memory as the `host` part of a sampler line (for sources without host stats)."""
    return (await _local_host(profile)).model_dump(exclude={"ts"})


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

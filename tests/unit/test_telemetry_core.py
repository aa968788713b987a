"""NVML collector (with the fake pynvml), frames, history, replay, host stats, and the local HostTelemetry."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.model.snapshot import GpuSample, ServiceStatus, TelemetryStatus
from ddtree_tui.remote.hoststats import (
    cpu_percent,
    nearest_existing,
    parse_cpu_times,
    parse_meminfo,
    proc_ancestors,
)
from ddtree_tui.telemetry import HostTelemetry, snapshot_once
from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.telemetry.history import GpuHistory
from ddtree_tui.telemetry.host import LocalHostStats
from ddtree_tui.telemetry.nvml import NvmlUnavailable, nvml_line, open_nvml
from ddtree_tui.telemetry.replay import BUILTIN_NOTE, ReplayError, build_builtin_recording, load_recording
from ddtree_tui.telemetry.source import (
    TelemetrySink,
    UnknownTelemetrySource,
    Update,
    register_source,
    registered_kinds,
    unregister_source,
)
from ddtree_tui.transport.local import LocalTransport

FIX = Path(__file__).parent.parent / "fixtures"


@pytest.fixture
def fake_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, Path]:
    """A fresh fake pynvml module, its state file, installed as sys.modules['pynvml']."""
    state = tmp_path / "nvml.json"
    state.write_text("{}")
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    spec = importlib.util.spec_from_file_location("pynvml", FIX / "telemetry" / "fake_nvml" / "pynvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod, state


def set_state(state: Path, **kw: object) -> None:
    state.write_text(json.dumps(kw))
    t = time.time() + 1
    os.utime(state, (t, t))  # a new mtime even within the same clock tick


def test_nvml_v2_memory_and_not_supported(fake_nvml: tuple[ModuleType, Path]) -> None:
    mod, _ = fake_nvml
    coll = open_nvml()
    g0, g1 = coll.sample()
    assert g0["mem_used_mb"] == 21491  # v2: reserved memory is not counted as used (v1 would say 22003)
    assert (g0["util_gpu"], g0["temp_c"], g0["power_w"], g0["power_limit_w"], g0["sm_clock_mhz"]) == (
        100, 57, 691.29, 700.0, 1485,
    )  # fmt: skip
    assert g0["pstate"] == "P0" and g0["throttle_mask"] is None  # NotSupported → None
    assert g0["name"] == "NVIDIA H200" and g0["uuid"].startswith("GPU-a3d17c95")
    assert g0["processes"][0]["pid"] == 567 and g0["processes"][0]["used_memory_mb"] == 21482
    assert "fault" not in g1 and g1["mem_used_mb"] == 4
    # handles are fetched once and reused
    before = mod.CALLS["handles"]
    for _ in range(5):
        coll.sample()
    assert mod.CALLS["handles"] == before


def test_nvml_v1_fallback_and_lost_gpu(fake_nvml: tuple[ModuleType, Path]) -> None:
    _, state = fake_nvml
    set_state(state, no_v2=True, lost=[1])
    coll = open_nvml()
    g0, g1 = coll.sample()
    assert g0["mem_used_mb"] == 21491 + 512  # v1 fallback
    assert g1["fault"] == "GPU is lost" and g1["uuid"].startswith("GPU-44f393d0")
    fb = FrameBuilder()
    _, gpus, status = fb.build(nvml_line(coll), now=100.0)
    assert gpus[1].health == "fault" and gpus[1].fault == "GPU is lost" and gpus[1].fault_at == 100.0
    assert gpus[0].health == "ok" and status.source == "nvml" and status.driver_version == "580.159.04"
    _, gpus, _ = fb.build(nvml_line(coll), now=105.0)
    assert gpus[1].fault_at == 100.0  # the time the fault began, not of this tick
    set_state(state)
    _, gpus, _ = fb.build(nvml_line(coll), now=110.0)
    assert gpus[1].health == "ok" and gpus[1].fault is None and gpus[1].mem_used_mb == 4 + 512  # still v1


def test_nvml_no_driver(fake_nvml: tuple[ModuleType, Path]) -> None:
    _, state = fake_nvml
    set_state(state, no_driver=True)
    with pytest.raises(NvmlUnavailable) as e:
        open_nvml()
    assert e.value.no_gpu


def test_proc_parsers() -> None:
    stat_a = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3"
    stat_b = "cpu  150 0 150 900 0 0 0 0 0 0\n"
    assert cpu_percent(parse_cpu_times(stat_a), parse_cpu_times(stat_b)) == 50.0
    assert parse_cpu_times("garbage") is None and cpu_percent(None, (1, 2)) is None
    assert parse_meminfo("MemTotal: 2048000 kB\nMemFree: 1 kB\nMemAvailable: 1024000 kB\n") == (1000, 2000)
    assert parse_meminfo("") == (None, None)
    assert nearest_existing("/definitely/not/here/x") == "/"
    assert proc_ancestors(os.getpid())[0] == os.getppid()


def test_local_host_stats(tmp_path: Path) -> None:
    h = LocalHostStats(str(tmp_path / "not" / "yet")).sample()
    assert h.mem_total_mb and h.mem_used_mb is not None and h.mem_used_mb <= h.mem_total_mb
    assert h.disk_free_mb is not None and h.disk_total_mb and h.uptime_s and h.uptime_s > 0
    assert h.load1 is not None and h.cpu_percent is not None


def test_history_bounded() -> None:
    hist = GpuHistory(maxlen=5)
    for i in range(100):
        hist.add([GpuSample(index=0, util_gpu=i, power_w=1.5, mem_used_mb=None)])
    assert hist.series(0, "util_gpu") == [95.0, 96.0, 97.0, 98.0, 99.0]
    assert hist.series(0, "mem_used_mb") == [] and hist.series(3, "temp_c") == []
    hist.add([GpuSample(index=0, util_gpu=1000, health="fault", fault="GPU is lost")])
    assert hist.series(0, "util_gpu")[-1] == 99.0
    with pytest.raises(KeyError):
        hist.series(0, "nope")


def test_service_matched_by_pid_or_ancestor() -> None:
    fb = FrameBuilder()
    fb.set_service_pids({4000: "dflash"})
    line = {
        "v": 1,
        "src": "nvml",
        "gpus": [
            {"index": 0, "processes": [{"pid": 4321, "name": "python3", "used_memory_mb": 100}]},
            {"index": 1, "processes": [{"pid": 4000, "name": "python3", "used_memory_mb": 1}]},
            {"index": 2, "processes": [{"pid": 99, "name": "other", "used_memory_mb": 1}]},
        ],
        "anc": {"4321": [4100, 4000], "99": [98]},
    }
    _, gpus, _ = fb.build(line)
    assert [g.service for g in gpus] == ["dflash", "dflash", None]
    assert gpus[0].processes[0].service == "dflash"


def test_smi_handle_fault_keeps_identity() -> None:
    fields = ["index", "uuid", "name", "pci.bus_id", "utilization.gpu"]
    fb = FrameBuilder()
    rows = ["0, GPU-a, NVIDIA H200, 00000000:00:06.0, 5", "1, GPU-b, NVIDIA H200, 00000000:41:00.0, 7"]
    fb.build({"v": 1, "src": "nvidia-smi", "smi": {"fields": fields, "rows": rows}}, now=1.0)
    msg = "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error"
    _, gpus, status = fb.build(
        {"v": 1, "src": "nvidia-smi", "smi": {"fields": fields, "rows": rows[:1], "errs": [msg]}}, now=2.0
    )
    assert status.fault is None
    assert [(g.index, g.uuid, g.health) for g in gpus] == [(0, "GPU-a", "ok"), (1, "GPU-b", "fault")]
    assert gpus[1].fault == msg and gpus[1].fault_at == 2.0


def test_smi_no_devices_marks_known_gpus() -> None:
    fields = ["index", "uuid", "utilization.gpu"]
    fb = FrameBuilder()
    fb.build({"v": 1, "src": "nvidia-smi", "smi": {"fields": fields, "rows": ["0, GPU-a, 5"]}}, now=1.0)
    _, gpus, status = fb.build(
        {
            "v": 1,
            "src": "nvidia-smi",
            "smi": {"fields": fields, "rows": [], "errs": ["No devices were found"]},
        },
        now=3.0,
    )
    assert status.fault == "No devices were found" and status.fault_at == 3.0
    assert gpus[0].health == "fault" and gpus[0].uuid == "GPU-a"


def test_builtin_replay_is_made_from_the_fixtures() -> None:
    shipped = Path(__file__).parents[2] / "ddtree_tui" / "data" / "gpu-replay-h200-under-load.jsonl"
    assert shipped.read_text().splitlines() == build_builtin_recording(FIX / "gpu")
    frames, note = load_recording("h200-under-load")
    assert note == BUILTIN_NOTE and 50 <= len(frames) <= 70
    peak = max(frames, key=lambda f: f["gpus"][0]["power_w"])
    assert peak["gpus"][0]["power_w"] == 691.29 and peak["gpus"][0]["util_gpu"] == 100
    assert peak["gpus"][0]["processes"] == [{"pid": 567, "name": "python3", "used_memory_mb": 21482}]
    assert frames[0]["gpus"][0]["power_w"] == 99.86  # the idle row


def test_replay_file_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "rec.jsonl"
    p.write_text(
        '{"meta": {"note": "my box"}}\n{"v": 1, "src": "nvml", "gpus": [{"index": 0, "util_gpu": 3}]}\n'
    )
    frames, note = load_recording(str(p))
    assert note == "my box (not live)" and frames[0]["gpus"][0]["util_gpu"] == 3
    p.write_text("not json\n")
    with pytest.raises(ReplayError, match="line 1"):
        load_recording(str(p))
    with pytest.raises(ReplayError, match="h200-under-load"):
        load_recording(str(tmp_path / "missing.jsonl"))


def profile(tmp_path: Path, extra: str = "") -> object:
    return parse_profile(f'name = "me"\naddress = "local"\nworkdir = "{tmp_path}/w"\n{extra}')


async def collect(tel: HostTelemetry, updates: list, n: int, timeout: float = 10.0) -> None:
    task = asyncio.create_task(tel.run())
    try:
        deadline = time.monotonic() + timeout
        while len(updates) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(updates) >= n, updates[-1:] if updates else "no update"


async def test_local_nvml_telemetry(tmp_path: Path, fake_nvml: tuple[ModuleType, Path]) -> None:
    prof = profile(tmp_path)
    updates: list = []
    tel = HostTelemetry(LocalTransport(prof), prof, on_update=lambda *a: updates.append(a), interval=0.05)
    tel.set_service_pids({567: "dflash"})
    await collect(tel, updates, 4)
    host, gpus, status = updates[-1]
    assert status == TelemetryStatus(source="nvml", driver_version="580.159.04", cuda_version="13.0")
    assert host is not None and host.mem_total_mb
    assert gpus[0].service == "dflash" and gpus[0].mem_used_mb == 21491
    assert tel.history.series(0, "power_w")[-1] == 691.29 and len(tel.history.series(1, "temp_c")) >= 4
    assert tel.mode_used == "nvml-local"


async def test_local_no_driver_keeps_host_stats(tmp_path: Path, fake_nvml: tuple[ModuleType, Path]) -> None:
    set_state(fake_nvml[1], no_driver=True)
    prof = profile(tmp_path)
    updates: list = []
    tel = HostTelemetry(LocalTransport(prof), prof, on_update=lambda *a: updates.append(a), interval=0.05)
    await collect(tel, updates, 2)
    host, gpus, status = updates[-1]
    assert status.source == "none" and status.note == "no NVIDIA GPU" and status.fault is None
    assert gpus == [] and host is not None and host.mem_total_mb


@pytest.mark.slow
async def test_local_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the host's CPU % waits 0.25 s a tick for a window worth reading (telemetry/host.py); this test is about the
    # GPU frames the replay plays, not the CPU %, so the ticks come at the test's 0.02 s instead (45 ticks: 11 s)
    monkeypatch.setattr("ddtree_tui.telemetry.host.MIN_CPU_WINDOW_S", 0.0)
    prof = profile(tmp_path, '[telemetry]\nsource = "replay"\nreplay = "h200-under-load"\n')
    updates: list = []
    tel = HostTelemetry(LocalTransport(prof), prof, on_update=lambda *a: updates.append(a), interval=0.02)
    await collect(tel, updates, 15)
    host, gpus, status = updates[-1]
    assert status.source == "replay" and status.note == BUILTIN_NOTE
    assert host is not None and len(gpus) == 2
    assert gpus[0].uuid == "GPU-a3d17c95-2dae-bb06-e486-01c3ab05eacd"
    # issue 19: no service runs, so the demo's GPU stays in the recording's idle part
    assert max(tel.history.series(0, "util_gpu")) == 0.0 and max(g.mem_used_mb or 0 for g in gpus) < 1000
    tel.set_service_pids({4242: "dflash"})  # a service starts: it holds the model's memory at idle (issue 28)
    n = len(updates)
    await collect(tel, updates, n + 15)
    assert max(tel.history.series(0, "util_gpu")) == 0.0 and updates[-1][1][0].mem_used_mb == 21491
    # it runs requests: the under-load part plays
    tel.note_service(
        ServiceStatus(
            host="local", name="dflash", algorithm="dflash", port=30000, state="ready", running_reqs=2
        )
    )
    n = len(updates)
    await collect(tel, updates, n + 15)
    assert max(tel.history.series(0, "util_gpu")) == 100.0 and updates[-1][1][0].mem_used_mb == 21491


async def test_snapshot_once_local(tmp_path: Path, fake_nvml: tuple[ModuleType, Path]) -> None:
    prof = profile(tmp_path)
    host, gpus, status = await snapshot_once(LocalTransport(prof), prof)
    assert status.source == "nvml" and len(gpus) == 2 and host is not None
    prof = profile(tmp_path, '[telemetry]\nsource = "replay"\n')
    host, gpus, status = await snapshot_once(LocalTransport(prof), prof)
    assert status.source == "replay" and gpus[0].power_w == 99.86


class _TwoGpus:
    """A telemetry source of a test's own: two GPUs at 42 % busy, every tick."""

    def __init__(self, profile: object) -> None:
        self.profile = profile

    async def run(self, sink: TelemetrySink) -> None:
        sink.mode_used = "test-source"
        async for _ in sink.ticks():
            sink.emit({"v": 1, "gpus": [{"index": 0, "util_gpu": 42}, {"index": 1, "util_gpu": 42}]})

    async def once(self, transport: object, profile: object, timeout: float) -> Update:
        return FrameBuilder().build({"v": 1, "gpus": [{"index": 0, "util_gpu": 7}]})


async def test_a_registered_source_is_used_without_editing_the_sampler(tmp_path: Path) -> None:
    """Issue 24: a new telemetry kind is one register_source call; HostTelemetry and snapshot_once find it."""
    base = profile(tmp_path)
    prof = base.model_copy(
        update={"telemetry": base.telemetry.model_copy(update={"source": "test-two-gpus"})}
    )
    with pytest.raises(UnknownTelemetrySource, match=r"'test-two-gpus'.*known: auto"):
        HostTelemetry(LocalTransport(prof), prof, on_update=lambda *a: None)
    _, _, status = await snapshot_once(LocalTransport(prof), prof)
    assert status.fault is not None and "unknown telemetry source 'test-two-gpus'" in status.fault
    register_source("test-two-gpus", _TwoGpus)
    try:
        updates: list = []
        tel = HostTelemetry(LocalTransport(prof), prof, on_update=lambda *a: updates.append(a), interval=0.02)
        assert isinstance(tel.source, _TwoGpus) and "test-two-gpus" in registered_kinds()
        await collect(tel, updates, 3)
        assert tel.mode_used == "test-source" and [g.util_gpu for g in updates[-1][1]] == [42, 42]
        assert tel.history.series(1, "util_gpu")[-1] == 42
        _, gpus, _ = await snapshot_once(LocalTransport(prof), prof)
        assert [g.util_gpu for g in gpus] == [7]
        with pytest.raises(ValueError, match="already registered"):
            register_source("test-two-gpus", _TwoGpus)
    finally:
        unregister_source("test-two-gpus")
    assert "test-two-gpus" not in registered_kinds()


def test_cpu_percent_is_measured_on_the_samplers_own_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: `status --demo` said `cpu 0%` on an ~11 % busy machine (the first read right after the
    priming one, and psutil's module-wide baseline reset by every other sampler)."""
    from collections import namedtuple

    import ddtree_tui.telemetry.host as host_mod

    Times = namedtuple("Times", "user system idle iowait")
    readings = iter([Times(10.0, 0.0, 90.0, 0.0), Times(21.0, 0.0, 179.0, 0.0)])
    monkeypatch.setattr(host_mod.psutil, "cpu_times", lambda: next(readings))
    monkeypatch.setattr(host_mod.psutil, "cpu_percent", lambda interval=None: 0.0)  # must not be used
    slept: list[float] = []
    monkeypatch.setattr(host_mod.time, "sleep", slept.append)
    stats = LocalHostStats(str(tmp_path))
    assert stats.sample().cpu_percent == 11.0  # 11 busy of 100 CPU seconds
    assert slept and slept[0] > 0  # the first sample waited for a real window


def test_cuda_version_texts() -> None:
    """Issue 19: the header shows the CUDA version; NVML gives 13000 for 13.0, nvidia-smi prints it."""
    from ddtree_tui.remote.smi import cuda_from_smi, cuda_text

    assert cuda_text(13000) == "13.0" and cuda_text(12040) == "12.4" and cuda_text(0) is None
    header = (Path(__file__).parents[1] / "fixtures" / "gpu" / "nvidia-smi.txt").read_text()
    assert cuda_from_smi(header) == "13.0" and cuda_from_smi("no header") is None
    fb = FrameBuilder()
    _, _, status = fb.build(
        {"v": 1, "t": 1.0, "src": "nvml", "driver": "580.159.04", "cuda": "13.0", "gpus": []}, now=1.0
    )
    assert status.cuda_version == "13.0"
    _, _, status = fb.build({"v": 1, "t": 2.0, "src": "nvml", "gpus": []}, now=2.0)
    assert status.cuda_version == "13.0"  # kept from the first line that had it

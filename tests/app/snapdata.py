"""A fixed fleet for snapshot tests: every state the panes can show, at a frozen instant."""

from __future__ import annotations

from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.model.snapshot import (
    FleetSnapshot,
    GpuSample,
    HostSample,
    HostView,
    ServiceStatus,
    TelemetryStatus,
)
from ddtree_tui.ui.backend import StaticFleet, StaticTodo

T0 = 1_750_000_000.0


def _gpu(i: int, util: int, mem: int, svc: str | None = None, fault: str | None = None) -> GpuSample:
    return GpuSample(
        index=i,
        name="NVIDIA H200",
        util_gpu=util,
        mem_used_mb=mem,
        mem_total_mb=143771,
        temp_c=40 + util // 4,
        power_w=120.0 + util * 5.5,
        power_limit_w=700.0,
        service=svc,
        health="fault" if fault else "ok",
        fault=fault,
        ts=T0,
    )


def snapshot() -> FleetSnapshot:
    local = HostView(
        name="local",
        address="local",
        state="connected",
        host=HostSample(
            cpu_percent=12.0,
            load1=0.8,
            mem_used_mb=20480,
            mem_total_mb=64000,
            disk_free_mb=120000,
            disk_total_mb=500000,
            ts=T0,
        ),
        gpus=[_gpu(0, 97, 21491, "dflash,ddtree-shadow")],
        telemetry=TelemetryStatus(source="replay", note="replay of a real H200 recording"),
        services=[
            ServiceStatus(
                name="dflash",
                host="local",
                algorithm="dflash",
                launcher="sim",
                simulated=True,
                port=31010,
                state="ready",
                pid=4242,
                started_at=T0 - 125,
                accept_length=3.41,
                gen_throughput=139.6,
                health_latency_ms=3.2,
            ),
            ServiceStatus(
                name="ddtree-shadow",
                host="local",
                algorithm="ddtree",
                mode="shadow-linear",
                launcher="sim",
                simulated=True,
                port=31011,
                state="starting",
                started_at=T0 - 4,
                detail="Load weight begin",
            ),
        ],
    )
    ct200 = HostView(
        name="ct200",
        address="ct200",
        state="disconnected",
        error="Connection refused",
        next_retry_at=T0 + 7,
        telemetry=TelemetryStatus(source="nvidia-smi"),
        gpus=[_gpu(1, 0, 512, None, "Xid 79: GPU has fallen off the bus")],
        services=[
            ServiceStatus(
                name="ddtree-tree",
                host="ct200",
                algorithm="ddtree",
                mode="tree",
                port=30011,
                state="crashed",
                detail="exit status 1: CUDA out of memory",
            ),
        ],
    )
    return FleetSnapshot(ts=T0, hosts=[local, ct200])


def history() -> dict[tuple[str, int], list[float]]:
    return {("local", 0): [float((i * 37) % 100) for i in range(40)], ("ct200", 1): [0.0] * 40}


def static_fleet() -> StaticFleet:
    profiles = [
        HostProfile(name="local", service=[ServiceSpec(name="dflash", launcher="sim", port=31010)]),
        HostProfile(name="ct200", address="ct200"),
    ]
    todos = [
        StaticTodo(
            content="launch dflash on local",
            status="completed",
            priority="high",
            check="service local/dflash ready",
        ),
        StaticTodo(content="benchmark seed3", status="in_progress", priority="medium"),
        StaticTodo(content="move ddtree to ct200", status="pending", priority="low"),
    ]
    logs = {
        "local/dflash": [
            f"[2025-06-15 12:00:{i:02d}] Decode batch. #running-req: 1, accept len: 3.41" for i in range(30)
        ]
    }
    return StaticFleet(snapshot(), profiles=profiles, history=history(), logs=logs, todos=todos)

"""GPU telemetry read from DCGM-exporter series in a Prometheus server (`[telemetry] source = "prometheus"`),
for fleets that already run DCGM exporter -> Prometheus: no sampler on the host, ssh stays for launch, kill
and logs.

One instant query per tick selects every DCGM field we show for one host (`{__name__=~"DCGM_FI_DEV_…",
<host_label>="<host_value>"}`) and folds the series into GpuSample by their `gpu` label. Names and units as
dcgm-exporter's default counters: GPU_UTIL and MEM_COPY_UTIL in %, FB_USED / FB_FREE in MiB, POWER_USAGE in
W, GPU_TEMP in °C, SM_CLOCK in MHz, XID_ERRORS the value of the last XID seen (0: none). Labels: `gpu`,
`UUID`, `modelName`, `pci_bus_id`, `Hostname`, `DCGM_FI_DRIVER_VERSION`.

Faults are state: Prometheus unreachable or no series for the host is a host-level fault; a GPU that was seen
and is no longer reported is kept and marked (it fell off the bus or its exporter died); a non-zero XID marks
the GPU.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

from ddtree_tui.config import HostProfile
from ddtree_tui.state import GpuSample, TelemetryStatus

FIELDS: dict[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "util_gpu",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "util_mem",
    "DCGM_FI_DEV_FB_USED": "mem_used_mb",
    "DCGM_FI_DEV_FB_FREE": "_fb_free",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_XID_ERRORS": "_xid",
}
_INT_FIELDS = {"util_gpu", "util_mem", "mem_used_mb", "temp_c", "sm_clock_mhz", "_fb_free", "_xid"}
NOTE = "DCGM exporter via Prometheus"


class PrometheusError(Exception):
    """Prometheus could not be asked, or answered something that is not a query result."""


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def host_query(host_label: str, host_value: str) -> str:
    names = "|".join(FIELDS)
    return f'{{__name__=~"{names}", {host_label}={_quote(host_value)}}}'


def query_for(profile: HostProfile) -> str:
    t = profile.telemetry
    return host_query(t.host_label, t.host_value or profile.name)


async def instant_query(client: httpx.AsyncClient, base_url: str, promql: str, timeout: float) -> list[Any]:
    """`/api/v1/query`; the result vector, or PrometheusError saying why not."""
    url = base_url.rstrip("/") + "/api/v1/query"
    try:
        r = await client.get(url, params={"query": promql}, timeout=timeout)
    except httpx.HTTPError as e:
        raise PrometheusError(f"Prometheus at {base_url} not answering: {e!r}") from None
    try:
        body = r.json()
    except ValueError:
        raise PrometheusError(f"Prometheus at {base_url}: HTTP {r.status_code}, not JSON") from None
    if r.status_code != 200 or body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {base_url}: {body.get('error') or f'HTTP {r.status_code}'}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusError(f"Prometheus at {base_url}: expected a vector, got {data.get('resultType')}")
    return list(data.get("result") or [])


class DcgmFrames:
    """Series -> GpuSample list, keeping the GPUs seen before so that a vanished one stays, marked."""

    def __init__(self, host_value: str) -> None:
        self.host_value = host_value
        self.known: dict[int, GpuSample] = {}
        self._fault_since: dict[int, float] = {}
        self._host_fault_since: float | None = None

    def build(
        self, series: list[Mapping[str, Any]], now: float | None = None
    ) -> tuple[list[GpuSample], TelemetryStatus]:
        now = time.time() if now is None else now
        per_gpu: dict[int, dict[str, Any]] = {}
        driver: str | None = None
        for s in series:
            labels = s.get("metric") or {}
            field = FIELDS.get(str(labels.get("__name__", "")))
            try:
                idx = int(labels.get("gpu", ""))
                value = float(s["value"][1])
            except (KeyError, ValueError, TypeError, IndexError):
                continue
            if field is None or value != value:  # NaN
                continue
            d = per_gpu.setdefault(idx, {"index": idx})
            d[field] = round(value) if field in _INT_FIELDS else round(value, 2)
            d.setdefault("uuid", labels.get("UUID"))
            d.setdefault("name", labels.get("modelName"))
            d.setdefault("pci_bus_id", labels.get("pci_bus_id"))
            driver = driver or labels.get("DCGM_FI_DRIVER_VERSION")
        gpus: list[GpuSample] = []
        for idx in sorted(set(per_gpu) | set(self.known)):
            d = per_gpu.get(idx)
            if d is None:  # seen before, gone now
                since = self._fault_since.setdefault(idx, now)
                old = self.known[idx]
                gpus.append(
                    GpuSample(
                        index=idx,
                        uuid=old.uuid,
                        name=old.name,
                        pci_bus_id=old.pci_bus_id,
                        mem_total_mb=old.mem_total_mb,
                        health="fault",
                        fault="no longer reported by DCGM exporter (fell off the bus?)",
                        fault_at=since,
                        ts=now,
                    )
                )
                continue
            free = d.pop("_fb_free", None)
            xid = d.pop("_xid", None)
            if free is not None and d.get("mem_used_mb") is not None:
                d["mem_total_mb"] = int(d["mem_used_mb"]) + int(free)
            if xid:
                since = self._fault_since.setdefault(idx, now)
                d.update(health="fault", fault=f"XID {xid}", fault_at=since)
            else:
                self._fault_since.pop(idx, None)
            g = GpuSample.model_validate({**d, "ts": now})
            self.known[idx] = g
            gpus.append(g)
        fault = None
        if not per_gpu:
            self._host_fault_since = self._host_fault_since or now
            fault = f"no DCGM series for this host in Prometheus ({self.host_value})"
        else:
            self._host_fault_since = None
        status = TelemetryStatus(
            source="prometheus",
            note=NOTE,
            fault=fault,
            fault_at=self._host_fault_since if fault else None,
            driver_version=driver,
        )
        return gpus, status

    def failed(self, message: str, now: float | None = None) -> tuple[list[GpuSample], TelemetryStatus]:
        now = time.time() if now is None else now
        self._host_fault_since = self._host_fault_since or now
        gpus = list(self.known.values())
        return gpus, TelemetryStatus(
            source="prometheus", note=NOTE, fault=message, fault_at=self._host_fault_since
        )


async def read_once(
    profile: HostProfile, client: httpx.AsyncClient, frames: DcgmFrames, timeout: float
) -> tuple[list[GpuSample], TelemetryStatus]:
    """One query for one host; never raises for a Prometheus problem (the status carries it)."""
    url = profile.telemetry.prometheus_url or ""
    try:
        series = await instant_query(client, url, query_for(profile), timeout)
    except PrometheusError as e:
        return frames.failed(str(e))
    return frames.build(series)

"""GPU telemetry read from DCGM-exporter series in a Prometheus server (`[telemetry] source = "prometheus"`),
for fleets that already run DCGM exporter -> Prometheus: no sampler on the host, ssh stays for launch, kill
and logs.

One instant query per tick and Prometheus server selects every DCGM field we show for every host that reads
from it (`{__name__=~"DCGM_FI_DEV_…", <host_label>=~"host1|host2|…"}`; SharedPoller), and each host folds its
own series into GpuSample by their `gpu` label: 200 hosts cost one HTTP request a second, not 200. Names and units as
dcgm-exporter's default counters: GPU_UTIL and MEM_COPY_UTIL in %, FB_USED / FB_FREE in MiB, POWER_USAGE in
W, GPU_TEMP in °C, SM_CLOCK in MHz, XID_ERRORS the value of the last XID seen (0: none). Labels: `gpu`,
`UUID`, `modelName`, `pci_bus_id`, `Hostname`, `DCGM_FI_DRIVER_VERSION`.

Faults are state: Prometheus unreachable or no series for the host is a host-level fault; a GPU that was seen
and is no longer reported is kept and marked (it fell off the bus or its exporter died); a non-zero XID marks
the GPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import aiohttp

from ddtree_tui.config import HostProfile
from ddtree_tui.lib import http
from ddtree_tui.model.snapshot import GpuSample, TelemetryStatus

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


GONE = "no longer reported by DCGM exporter (fell off the bus?)"
_IDENTITY = {"index", "uuid", "name", "pci_bus_id", "mem_total_mb"}  # what a GPU that went away still shows


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


class VectorSample(TypedDict, total=False):
    """One instant-vector result as Prometheus's HTTP API documents it (`{"metric": {label: value},
    "value": [unix time, "value"]}`); read as JSON, so DcgmFrames.build still checks every part it uses."""

    metric: dict[str, str]
    value: list[float | str]


async def _instant_query(
    client: aiohttp.ClientSession, base_url: str, promql: str, timeout: float, cap: int = http.BODY_CAP
) -> list[VectorSample]:
    """`/api/v1/query`; the result vector, or PrometheusError saying why not (an answer over `cap` bytes too)."""
    url = base_url.rstrip("/") + "/api/v1/query"
    try:
        async with client.get(
            url, params={"query": promql}, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as r:
            status = r.status
            raw = await http.read_body(r, cap)
    except http.BodyTooLarge as e:
        raise PrometheusError(f"Prometheus at {base_url}: {e}") from None
    except http.REQUEST_ERRORS as e:
        raise PrometheusError(f"Prometheus at {base_url} not answering: {http.describe(e)}") from None
    try:
        body = json.loads(raw)
    except ValueError:
        raise PrometheusError(f"Prometheus at {base_url}: HTTP {status}, not JSON") from None
    if not isinstance(body, dict):
        raise PrometheusError(f"Prometheus at {base_url}: HTTP {status}, not a query result")
    if status != 200 or body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {base_url}: {body.get('error') or f'HTTP {status}'}")
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
        self,
        series: Sequence[VectorSample],
        now: float | None = None,
        info: Mapping[str, Mapping[str, str]] | None = None,
    ) -> tuple[list[GpuSample], TelemetryStatus]:
        """`series`: instant-vector results; `info`: gpu -> identity labels (UUID, modelName, …) when the
        series themselves were aggregated down to __name__, gpu and the host label."""
        now = time.time() if now is None else now
        per_gpu: dict[int, dict[str, Any]] = {}
        driver: str | None = None
        for gpu, labels in (info or {}).items():
            with contextlib.suppress(ValueError):
                ident = per_gpu.setdefault(int(gpu), {"index": int(gpu)})
                ident.update(
                    uuid=labels.get("UUID"), name=labels.get("modelName"), pci_bus_id=labels.get("pci_bus_id")
                )
                if labels.get("_total_mib"):
                    ident["mem_total_mb"] = int(labels["_total_mib"])
                driver = driver or labels.get("DCGM_FI_DRIVER_VERSION")
        have_data: set[int] = set()
        fields, ints = FIELDS, _INT_FIELDS
        for sr in series:  # the hot loop: 200 hosts × 64 series a second
            labels = sr.get("metric") or {}
            field = fields.get(labels.get("__name__"))  # type: ignore[arg-type]
            if field is None:
                continue
            try:
                idx = int(labels["gpu"])
                value = float(sr["value"][1])
            except (KeyError, ValueError, TypeError, IndexError):
                continue
            if value != value:  # NaN
                continue
            d = per_gpu.get(idx)
            if d is None:
                d = per_gpu[idx] = {"index": idx}
            if idx not in have_data:
                have_data.add(idx)
                if "uuid" not in d and "UUID" in labels:  # raw series carry the identity themselves
                    d.update(
                        uuid=labels.get("UUID"),
                        name=labels.get("modelName"),
                        pci_bus_id=labels.get("pci_bus_id"),
                    )
                    driver = driver or labels.get("DCGM_FI_DRIVER_VERSION")
            d[field] = round(value) if field in ints else round(value, 2)
        gpus: list[GpuSample] = []
        for idx in sorted(have_data | set(self.known)):
            d = per_gpu.get(idx) if idx in have_data else None
            if d is None:  # seen before, gone now
                since = self._fault_since.setdefault(idx, now)
                old = self.known[idx]
                gone = {"health": "fault", "fault": GONE, "fault_at": since, "ts": now}
                gpus.append(GpuSample.model_validate({**old.model_dump(include=_IDENTITY), **gone}))
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
        if not have_data:
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
    profile: HostProfile, client: aiohttp.ClientSession, frames: DcgmFrames, timeout: float
) -> tuple[list[GpuSample], TelemetryStatus]:
    """One query for one host; never raises for a Prometheus problem (the status carries it)."""
    url = profile.telemetry.prometheus_url or ""
    try:
        series = await _instant_query(client, url, query_for(profile), timeout)
    except PrometheusError as e:
        return frames.failed(str(e))
    return frames.build(series)


IDENTITY = ("UUID", "modelName", "pci_bus_id", "DCGM_FI_DRIVER_VERSION")
INFO_EVERY = 30  # ticks between identity queries (a GPU's uuid and model do not change)


def _hosts_match(host_label: str, host_values: list[str]) -> str:
    alts = "|".join(re.escape(v) for v in sorted(set(host_values)))
    return f"{host_label}=~{_quote(alts)}"


# what changes every tick and is on screen; memory size, model and uuid come with the identity query
TICK_FIELDS = (
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
)  # fmt: skip


def hosts_query(host_label: str, host_values: list[str]) -> str:
    """The values of every host at once, aggregated down to (__name__, gpu, host label): a small fraction
    of the JSON the raw series would be, for 200 hosts × 8 GPUs."""
    sel = f'{{__name__=~"{"|".join(TICK_FIELDS)}", {_hosts_match(host_label, host_values)}}}'
    return f"max by (__name__, gpu, {host_label}) ({sel})"


def identity_query(host_label: str, host_values: list[str]) -> str:
    """Each GPU's uuid, model, bus id and driver, with its memory size (used + free, MiB) as the value."""
    by = ", ".join(("gpu", host_label, *IDENTITY))
    m = _hosts_match(host_label, host_values)
    return f"max by ({by}) (DCGM_FI_DEV_FB_USED{{{m}}} + DCGM_FI_DEV_FB_FREE{{{m}}})"


Delivery = tuple[list[Any], dict[str, dict[str, str]]] | PrometheusError


class SharedPoller:
    """One query per tick for every host reading from one Prometheus with one host label; each subscriber
    gets its own host's series (or the error) in a queue that keeps only the latest tick."""

    def __init__(self, base_url: str, host_label: str, interval: float, timeout: float) -> None:
        self.base_url = base_url
        self.host_label = host_label
        self.interval = interval
        self.timeout = timeout
        self.subscribers: dict[str, list[asyncio.Queue[Delivery]]] = {}
        self.identity: dict[str, dict[str, dict[str, str]]] = {}  # host -> gpu -> labels
        self.queries = 0  # for tests and benchmarks
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, host_value: str) -> asyncio.Queue[Delivery]:
        q: asyncio.Queue[Delivery] = asyncio.Queue(maxsize=1)
        self.subscribers.setdefault(host_value, []).append(q)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"prometheus {self.base_url}")
        return q

    def unsubscribe(self, host_value: str, q: asyncio.Queue[Delivery]) -> None:
        qs = self.subscribers.get(host_value, [])
        with contextlib.suppress(ValueError):
            qs.remove(q)
        if not qs:
            self.subscribers.pop(host_value, None)
        if not self.subscribers and self._task is not None:
            self._task.cancel()
            self._task = None

    async def _identity(self, client: aiohttp.ClientSession, hosts: list[str]) -> None:
        self.queries += 1
        res = await _instant_query(
            client, self.base_url, identity_query(self.host_label, hosts), self.timeout
        )
        ident: dict[str, dict[str, dict[str, str]]] = {h: {} for h in hosts}
        for sr in res:
            m = sr.get("metric") or {}
            h = m.get(self.host_label)
            if h in ident and "gpu" in m:
                labels = {k: str(m[k]) for k in IDENTITY if k in m}
                with contextlib.suppress(KeyError, ValueError, TypeError, IndexError):
                    labels["_total_mib"] = str(round(float(sr["value"][1])))
                ident[h][str(m["gpu"])] = labels
        self.identity.update(ident)

    @staticmethod
    def _offer(q: asyncio.Queue[Delivery], item: Delivery) -> None:
        if q.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                q.get_nowait()
        q.put_nowait(item)

    async def _run(self) -> None:
        next_at = time.monotonic()
        async with http.session(timeout=self.timeout) as client:
            tick = 0
            while self.subscribers:
                hosts = list(self.subscribers)
                try:
                    # a host whose identity came back empty in the first ticks (Prometheus had not scraped
                    # its exporter yet) is asked again at once, not INFO_EVERY ticks later
                    empty = tick < INFO_EVERY and any(not self.identity.get(h) for h in hosts)
                    if tick % INFO_EVERY == 0 or empty or any(h not in self.identity for h in hosts):
                        await self._identity(client, hosts)
                    tick += 1
                    self.queries += 1
                    series = await _instant_query(
                        client, self.base_url, hosts_query(self.host_label, hosts), self.timeout
                    )
                except PrometheusError as e:
                    for qs in list(self.subscribers.values()):
                        for q in qs:
                            self._offer(q, e)
                else:
                    by_host: dict[str, list[Any]] = {h: [] for h in hosts}
                    for sr in series:
                        v = (sr.get("metric") or {}).get(self.host_label)
                        if v in by_host:
                            by_host[v].append(sr)
                    for h, got in by_host.items():
                        for q in list(self.subscribers.get(h, [])):
                            self._offer(q, (got, self.identity.get(h, {})))
                next_at += self.interval
                delay = next_at - time.monotonic()
                if delay < 0:  # late: skip, never pile up
                    next_at, delay = time.monotonic(), 0.0
                await asyncio.sleep(delay)


_POLLERS: dict[tuple[int, str, str, float], SharedPoller] = {}


def shared_poller(profile: HostProfile, interval: float) -> SharedPoller:
    """The poller for this profile's Prometheus, host label and interval, in this event loop."""
    t = profile.telemetry
    url = t.prometheus_url or ""
    key = (id(asyncio.get_running_loop()), url, t.host_label, interval)
    for k in [k for k, p in _POLLERS.items() if not p.subscribers and k != key]:
        del _POLLERS[k]  # idle pollers of this or a closed loop
    p = _POLLERS.get(key)
    if p is None:
        p = _POLLERS[key] = SharedPoller(url, t.host_label, interval, timeout=max(1.0, interval))
    return p

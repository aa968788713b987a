"""One sampler line (a dict, whatever made it: the remote program, local NVML, the shell fallback, a replay)
into the shared models: HostSample, GpuSample per GPU, TelemetryStatus.

Keeps the little state that turns a stream of lines into something a human can read: when a fault was first
seen (so its time does not move every tick), the GPUs known before a fault (so a lost GPU keeps its name),
and which pids are our services.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

from ddtree_tui.model.snapshot import GpuProcess, GpuSample, HostSample, TelemetryStatus
from ddtree_tui.telemetry.nvsmi import bus_key, decode_throttle, parse_apps, parse_query

_GPU_KEYS = (
    "uuid", "name", "pci_bus_id", "util_gpu", "util_mem", "mem_used_mb", "mem_total_mb", "temp_c", "power_w",
    "power_limit_w", "sm_clock_mhz", "pstate",
)  # fmt: skip
_HOST_KEYS = tuple(HostSample.model_fields) if hasattr(HostSample, "model_fields") else ()
_Source = Literal["nvml", "nvidia-smi", "nvidia-smi-oneshot", "replay", "none"]
_SOURCES: dict[str, _Source] = {s: s for s in ("nvml", "nvidia-smi", "nvidia-smi-oneshot", "replay", "none")}


class FrameBuilder:
    """Stateful converter; one per host stream."""

    def __init__(self, *, source_override: _Source | None = None, note: str | None = None) -> None:
        self.source_override = source_override
        self.note = note
        self.service_pids: dict[int, str] = {}
        self._procs: Mapping[str, Any] = {}  # the current line's /proc facts by pid (sampler's "procs")
        self.gpus: list[GpuSample] = []
        self.host: HostSample | None = None
        self.status = TelemetryStatus(source=source_override, note=note)
        self._fault_since: dict[str, float] = {}

    # --- helpers -------------------------------------------------------------------------------------------

    def _since(self, key: str, message: str, now: float) -> float:
        """The time a fault with this message was first seen on this key (reset when the message changes)."""
        k = f"{key}\x00{message}"
        if k not in self._fault_since:
            for old in [x for x in self._fault_since if x.startswith(key + "\x00")]:
                del self._fault_since[old]
            self._fault_since[k] = now
        return self._fault_since[k]

    def _clear(self, key: str) -> None:
        for old in [x for x in self._fault_since if x.startswith(key + "\x00")]:
            del self._fault_since[old]

    def _service_for(self, pid: int, anc: Mapping[str, Any]) -> str | None:
        if pid in self.service_pids:
            return self.service_pids[pid]
        for a in anc.get(str(pid)) or []:
            if isinstance(a, int) and a in self.service_pids:
                return self.service_pids[a]
        return None

    def _with_services(self, g: GpuSample, procs: list[GpuProcess], anc: Mapping[str, Any]) -> GpuSample:
        marked = [
            p.model_copy(
                update={"service": self._service_for(p.pid, anc) or p.service, **self._proc_info(p.pid)}
            )
            for p in procs
        ]
        names = sorted({p.service for p in marked if p.service})
        return g.model_copy(update={"processes": marked, "service": ",".join(names) or None})

    # --- building ------------------------------------------------------------------------------------------

    def _host_from(self, d: object, ts: float) -> HostSample | None:
        if not isinstance(d, Mapping):
            return None
        return HostSample.model_validate({k: d.get(k) for k in _HOST_KEYS if k != "ts"} | {"ts": ts})

    def _gpus_from_nvml(self, items: list[Any], anc: Mapping[str, Any], ts: float) -> list[GpuSample]:
        out: list[GpuSample] = []
        for d in items:
            if not isinstance(d, Mapping) or not isinstance(d.get("index"), int):
                continue
            data: dict[str, Any] = {k: d.get(k) for k in _GPU_KEYS}
            data["index"] = d["index"]
            data["ts"] = ts
            mask = d.get("throttle_mask")
            data["throttle_reasons"] = decode_throttle(mask) if isinstance(mask, int) else None
            key = f"gpu{d['index']}"
            if d.get("fault"):
                prev = next((g for g in self.gpus if g.index == d["index"]), None)
                for k in ("uuid", "name", "pci_bus_id"):
                    if data.get(k) is None and prev is not None:
                        data[k] = getattr(prev, k)
                msg = str(d["fault"])
                data.update(health="fault", fault=msg, fault_at=self._since(key, msg, ts))
            else:
                self._clear(key)
            procs = [
                GpuProcess(pid=int(p["pid"]), name=p.get("name"), used_memory_mb=p.get("used_memory_mb"))
                for p in d.get("processes") or []
                if isinstance(p, Mapping) and isinstance(p.get("pid"), int)
            ]
            out.append(self._with_services(GpuSample.model_validate(data), procs, anc))
        return out

    def _gpus_from_smi(
        self, smi: Mapping[str, Any], anc: Mapping[str, Any], ts: float
    ) -> tuple[list[GpuSample], str | None, str | None]:
        rows = [str(r) for r in smi.get("rows") or []] + [str(e) for e in smi.get("errs") or []]
        fields = [str(f) for f in smi.get("fields") or []] or None
        parsed = parse_query("\n".join(rows), fields, ts=ts)
        apps = parse_apps([str(a) for a in smi.get("apps") or []])
        out: list[GpuSample] = []
        for g in parsed.samples:
            procs = apps.get(g.uuid or "\x00", []) + apps.get("bus:" + str(bus_key(g.pci_bus_id)), [])
            if g.health == "fault" and g.fault:
                prev = next((p for p in self.gpus if p.index == g.index), None)
                fill = {k: getattr(prev, k) for k in ("uuid", "name", "pci_bus_id") if getattr(g, k) is None}
                g = g.model_copy(
                    update={**(fill if prev else {}), "fault_at": self._since(f"gpu{g.index}", g.fault, ts)}
                )
            else:
                self._clear(f"gpu{g.index}")
            out.append(self._with_services(g, procs, anc))
        # a GPU whose handle could not be read has no row: keep it visible as a fault
        seen = {bus_key(g.pci_bus_id) for g in out}
        for bus, msg in parsed.gpu_faults.items():
            key = bus_key(bus)
            if key in seen:
                continue
            prev = next((p for p in self.gpus if bus_key(p.pci_bus_id) == key), None)
            used = {g.index for g in out}
            index = (
                prev.index
                if prev
                else next(i for i in range(len(out) + len(parsed.gpu_faults) + 1) if i not in used)
            )
            out.append(
                GpuSample(
                    index=index,
                    uuid=prev.uuid if prev else None,
                    name=prev.name if prev else None,
                    pci_bus_id=prev.pci_bus_id if prev else bus,
                    health="fault",
                    fault=msg,
                    fault_at=self._since(f"gpu{index}", msg, ts),
                    ts=ts,
                )
            )
        out.sort(key=lambda g: g.index)
        return out, parsed.fault, parsed.driver_version

    def _proc_info(self, pid: int) -> dict[str, Any]:
        """The sampler's /proc facts about a GPU process (user, CPU %, RSS, elapsed, command, parent), the
        fields of GpuProcess it may set, each of the right type; anything else is dropped."""
        raw = self._procs.get(str(pid))
        if not isinstance(raw, Mapping):
            return {}
        kinds: dict[str, tuple[type, ...]] = {
            "user": (str,),
            "cpu_percent": (int, float),
            "host_mem_mb": (int,),
            "elapsed_s": (int, float),
            "command": (str,),
            "ppid": (int,),
        }
        return {
            k: v for k, v in raw.items() if k in kinds and isinstance(v, kinds[k]) and not isinstance(v, bool)
        }

    def build(
        self, line: Mapping[str, object], now: float | None = None
    ) -> tuple[HostSample | None, list[GpuSample], TelemetryStatus]:
        """The models for one sampler line (its JSON object, every value checked before use); a line that
        carries no GPU part keeps the last GPUs."""
        now = time.time() if now is None else now
        ts = now
        raw_procs = line.get("procs")
        self._procs = raw_procs if isinstance(raw_procs, Mapping) else {}
        raw_anc = line.get("anc")
        anc: Mapping[str, Any] = raw_anc if isinstance(raw_anc, Mapping) else {}
        host = self._host_from(line.get("host"), ts)
        if host is not None:
            self.host = host
        src = self.source_override or line.get("src")
        source = _SOURCES.get(src) if isinstance(src, str) else None
        fault: str | None = str(line["err"]) if line.get("err") else None
        raw_driver, raw_cuda = line.get("driver"), line.get("cuda")
        driver = raw_driver if isinstance(raw_driver, str) else self.status.driver_version
        cuda = raw_cuda if isinstance(raw_cuda, str) else self.status.cuda_version
        gpus = self.gpus
        raw_gpus, raw_smi = line.get("gpus"), line.get("smi")
        if isinstance(raw_gpus, list):
            gpus = self._gpus_from_nvml(raw_gpus, anc, ts)
        elif isinstance(raw_smi, Mapping):
            gpus, smi_fault, smi_driver = self._gpus_from_smi(raw_smi, anc, ts)
            fault = smi_fault or fault
            driver = smi_driver or driver
        if fault and not gpus and self.gpus:
            # the whole GPU source failed (no devices, driver gone): keep the GPUs on screen, as faults
            gpus = self._all_faulted(fault, ts)
        note = self.note or (str(line["note"]) if line.get("note") else None)
        status = TelemetryStatus(
            source=source,
            note=note,
            fault=fault,
            fault_at=self._since("host", fault, ts) if fault else None,
            driver_version=driver,
            cuda_version=cuda,
        )
        if not fault:
            self._clear("host")
        self.gpus = gpus
        self.status = status
        return self.host if host is None else host, gpus, status

    def stalled(
        self, message: str, now: float | None = None
    ) -> tuple[HostSample | None, list[GpuSample], TelemetryStatus]:
        """The sampler stopped answering or died: everything we show is stale, and says so."""
        now = time.time() if now is None else now
        at = self._since("host", message, now)
        gpus = self._all_faulted(message, now)
        self.status = self.status.model_copy(update={"fault": message, "fault_at": at})
        self.gpus = gpus
        return self.host, gpus, self.status

    def _all_faulted(self, message: str, now: float) -> list[GpuSample]:
        """The last GPUs, each marked with `message` as its fault (since when it first said so)."""
        return [
            g.model_copy(
                update={
                    "health": "fault",
                    "fault": message,
                    "fault_at": self._since(f"gpu{g.index}", message, now),
                }
            )
            for g in self.gpus
        ]

    def set_service_pids(self, pids: Mapping[int, str]) -> None:
        self.service_pids = dict(pids)

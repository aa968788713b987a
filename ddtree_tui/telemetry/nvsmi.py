"""nvidia-smi's CSV output into GpuSample, and the driver's failure texts into faults.

Survives what real drivers print: a header with or without units, `[N/A]` / `[Not Supported]`, aliases the
header renames (`clocks.sm` → `clocks.current.sm`), a row that does not parse (skipped, noted, not fatal) and
the texts of a broken driver ("No devices were found", "NVIDIA-SMI has failed …", "Unable to determine the
device handle for GPU…", "GPU is lost").
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.model.snapshot import GpuProcess, GpuSample

# canonical field name → GpuSample attribute
FIELD_MAP: dict[str, str] = {
    "index": "index",
    "uuid": "uuid",
    "name": "name",
    "pci.bus_id": "pci_bus_id",
    "pstate": "pstate",
    "temperature.gpu": "temp_c",
    "utilization.gpu": "util_gpu",
    "utilization.memory": "util_mem",
    "memory.total": "mem_total_mb",
    "memory.used": "mem_used_mb",
    "power.draw": "power_w",
    "power.limit": "power_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks_event_reasons.active": "throttle_reasons",
}
# what nvidia-smi's header or help may call a field → our canonical name
ALIASES: dict[str, str] = {
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "clocks.memory": "clocks.mem",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "power.draw.instant": "power.draw",
    "enforced.power.limit": "power.limit",
    "temperature.gpu.tlimit": "temperature.gpu.tlimit",
}
FLOAT_ATTRS = {"power_w", "power_limit_w"}
INT_ATTRS = {"index", "util_gpu", "util_mem", "mem_used_mb", "mem_total_mb", "temp_c", "sm_clock_mhz"}
MISSING = {
    "",
    "[n/a]",
    "n/a",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "[insufficient permissions]",
}
DEFAULT_FIELDS = [
    "index", "uuid", "name", "pci.bus_id", "driver_version", "pstate", "temperature.gpu", "utilization.gpu",
    "utilization.memory", "memory.total", "memory.used", "memory.free", "power.draw", "power.limit", "clocks.sm",
    "clocks.mem", "clocks.max.sm", "fan.speed", "compute_mode", "mig.mode.current",
    "ecc.errors.uncorrected.volatile.total",
]  # fmt: skip
# bit → name of NVML's clocks event (throttle) reasons
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

_UNIT_RE = re.compile(r"\s*\[[^\]]*\]\s*$")
_VALUE_UNIT_RE = re.compile(r"^(-?[0-9.]+)\s*(%|MiB|W|MHz|C|KiB|GiB)$")
_BUS_RE = re.compile(r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_HANDLE_RE = re.compile(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+)?:?\s*(.*)")

FAULT_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"No devices were found", re.I), "no-devices"),
    (re.compile(r"NVIDIA-SMI has failed", re.I), "driver"),
    (re.compile(r"Failed to initialize NVML", re.I), "driver"),
    (re.compile(r"Driver/library version mismatch", re.I), "driver"),
    (re.compile(r"Unable to determine the device handle", re.I), "handle"),
    (re.compile(r"GPU is lost", re.I), "lost"),
    (re.compile(r"GPU requires reset|GPU requires restart", re.I), "lost"),
    (re.compile(r"is not a valid field to query", re.I), "field"),
    (re.compile(r"command not found|No such file or directory", re.I), "missing"),
    (re.compile(r"Unknown Error", re.I), "unknown"),
]


class CsvParseError(ValueError):
    """The text is not nvidia-smi query CSV at all (as opposed to a bad row, which is skipped)."""


class SmiParse(BaseModel):
    """What one nvidia-smi query printed: samples, rows skipped (with why), faults per GPU and host-wide."""

    model_config = ConfigDict(frozen=True)

    samples: list[GpuSample] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    fault: str | None = None  # host-wide: no devices, driver failed
    gpu_faults: dict[str, str] = Field(default_factory=dict)  # pci bus id (as printed) → message
    driver_version: str | None = None


def canonical(field: str) -> str:
    """A header cell or field name without its unit, with aliases mapped to the name we ask for."""
    f = _UNIT_RE.sub("", field.strip()).strip().lower()
    return ALIASES.get(f, f)


def is_missing(value: str) -> bool:
    return value.strip().lower() in MISSING


def decode_throttle(mask: int | None) -> list[str] | None:
    if mask is None:
        return None
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def _convert(attr: str, raw: str) -> object:
    v = raw.strip()
    if is_missing(v):
        return None
    m = _VALUE_UNIT_RE.match(v)
    if m:
        v = m.group(1)
    if attr in INT_ATTRS or attr in FLOAT_ATTRS:
        f = float(v)
        if not math.isfinite(f) or abs(f) > 1e12:
            raise ValueError(f"not a plausible number: {raw!r}")
        return int(f) if attr in INT_ATTRS else f
    if attr == "throttle_reasons":
        return decode_throttle(int(v, 16) if v.lower().startswith("0x") else int(v))
    return v


def detect_fault(text: str) -> tuple[str, str] | None:
    """(kind, the driver's line) for the first known failure text in text, or None."""
    for line in text.splitlines():
        for pat, kind in FAULT_PATTERNS:
            if pat.search(line):
                return kind, line.strip()
    return None


def bus_key(bus_id: str | None) -> str | None:
    """'00000000:41:00.0' and '0000:41:00.0' name the same GPU: compare bus:device.function, lower case."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    return ":".join(parts[-2:]) if len(parts) >= 2 else parts[0]


def _split(line: str) -> list[str]:
    return next(csv.reader([line], skipinitialspace=True), [])


def _looks_like_header(cells: Sequence[str]) -> bool:
    return (
        bool(cells)
        and canonical(cells[0]) in ("index", "uuid", "name", "pci.bus_id")
        and not any(c.strip().isdigit() for c in cells[:1])
    )


def parse_query(
    text: str,
    fields: Sequence[str] | None = None,
    *,
    ts: float = 0.0,
    fault_at: float | None = None,
) -> SmiParse:
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` output.

    `fields` is the list asked for (needed without a header; a header, when present, wins). Raises
    CsvParseError only when there is neither a header nor a field list, or the header names no index.
    """
    try:
        lines = [ln for ln in io.StringIO(text).read().splitlines() if ln.strip()]
    except Exception as e:  # pragma: no cover - StringIO of a str does not fail
        raise CsvParseError(str(e)) from None
    names: list[str] | None = [canonical(f) for f in fields] if fields else None
    samples: list[GpuSample] = []
    skipped: list[str] = []
    host_fault: str | None = None
    gpu_faults: dict[str, str] = {}
    driver: str | None = None
    for line in lines:
        cells = _split(line)
        if _looks_like_header(cells):
            names = [canonical(c) for c in cells]
            continue
        found = detect_fault(line)
        if found and found[0] == "handle":
            m = _HANDLE_RE.search(line)
            key = m.group(1) if m and m.group(1) else "?"
            gpu_faults[key.rstrip(":")] = line.strip()
            continue
        if found and found[0] == "lost" and not _is_row(cells):
            m = _BUS_RE.search(line)
            if m:
                gpu_faults[m.group(1)] = line.strip()
            else:
                host_fault = host_fault or found[1]
            continue
        if (
            found
            and found[0] in ("no-devices", "driver", "field", "missing", "unknown")
            and not _is_row(cells)
        ):
            host_fault = host_fault or found[1]
            continue
        if names is None:
            raise CsvParseError("nvidia-smi CSV without a header needs the list of fields asked for")
        if "index" not in names:
            raise CsvParseError("the field list has no 'index' column")
        if len(cells) != len(names):
            skipped.append(line)
            continue
        try:
            sample = _row_to_sample(names, cells, ts, fault_at)
        except (ValueError, TypeError, OverflowError):
            skipped.append(line)
            continue
        if sample is None:
            skipped.append(line)
            continue
        if driver is None and "driver_version" in names:
            dv = cells[names.index("driver_version")].strip()
            driver = None if is_missing(dv) else dv
        samples.append(sample)
    return SmiParse(
        samples=samples, skipped=skipped, fault=host_fault, gpu_faults=gpu_faults, driver_version=driver
    )


def _is_row(cells: Sequence[str]) -> bool:
    return bool(cells) and cells[0].strip().isdigit()


def _row_to_sample(
    names: Sequence[str], cells: Sequence[str], ts: float, fault_at: float | None
) -> GpuSample | None:
    data: dict[str, object] = {"ts": ts}
    lost: str | None = None
    for name, raw in zip(names, cells, strict=True):
        if "gpu is lost" in raw.lower() or "requires reset" in raw.lower():
            lost = raw.strip().strip("[]")
            continue
        attr = FIELD_MAP.get(name)
        if attr is None:
            continue
        data[attr] = _convert(attr, raw)
    if data.get("index") is None:
        return None
    if lost:
        data.update(health="fault", fault=lost, fault_at=fault_at if fault_at is not None else ts)
    return GpuSample.model_validate(data)


def parse_apps(
    text_or_rows: str | Iterable[str], service_of: dict[int, str] | None = None
) -> dict[str, list[GpuProcess]]:
    """`--query-compute-apps=pid,process_name,used_memory,gpu_uuid,gpu_bus_id` rows → processes per GPU uuid
    (per "bus:<bus key>" for a row without uuid). An empty output means no process."""
    rows = text_or_rows.splitlines() if isinstance(text_or_rows, str) else list(text_or_rows)
    out: dict[str, list[GpuProcess]] = {}
    for line in rows:
        cells = _split(line)
        if len(cells) < 4 or not cells[0].strip().isdigit():
            continue
        pid = int(cells[0])
        name = None if is_missing(cells[1]) else cells[1].strip()
        mem_raw = cells[2].strip()
        try:
            mem = None if is_missing(mem_raw) else int(float(mem_raw.split()[0]))
        except ValueError:
            mem = None
        proc = GpuProcess(
            pid=pid,
            name=name.rsplit("/", 1)[-1] if name else None,
            used_memory_mb=mem,
            service=(service_of or {}).get(pid),
        )
        uuid = cells[3].strip()
        if not is_missing(uuid):
            out.setdefault(uuid, []).append(proc)
        elif len(cells) > 4 and bus_key(cells[4]):  # no uuid: the bus id is the next best name
            out.setdefault("bus:" + str(bus_key(cells[4])), []).append(proc)
    return out


def query_rows(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """The rows of a `--format=csv,noheader,nounits` query as canonical field name → cell as printed.

    For a caller that judges what parse_query folds away: cells GpuSample has no attribute for (the doctor's
    compute_cap, driver_version per GPU) and a row's "[GPU is lost]". A line whose first cell is not an index,
    or whose cell count is not the fields', is skipped.
    """
    names = [canonical(f) for f in fields]
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        cells = [c.strip() for c in _split(line)]
        if len(cells) == len(names) and _is_row(cells):
            out.append(dict(zip(names, cells, strict=True)))
    return out

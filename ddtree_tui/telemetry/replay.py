"""Recorded GPU telemetry played back in a loop, always labelled as a replay (the demo uses it).

A recording is JSON lines in the sampler's own line format (what `benchmarks/telemetry_gpu_check.py` saves
from a real GPU), optionally led by a {"meta": {...}} line. The built-in "h200-under-load" is made from the
real H200 nvidia-smi output in tests/fixtures/gpu by `build_builtin_recording` (idle, ramp, under load,
right after, cool-down; interpolated between those real rows into a loop of 60 ticks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from ddtree_tui.lib.jsontypes import JsonObject
from ddtree_tui.model.snapshot import GpuSample
from ddtree_tui.telemetry.nvsmi import DEFAULT_FIELDS, parse_apps, parse_query

BUILTIN: dict[str, str] = {"h200-under-load": "gpu-replay-h200-under-load.jsonl"}
BUILTIN_NOTE = "replay of a real H200 recording (not live)"


class ReplayError(ValueError):
    pass


def _builtin_text(name: str) -> str:
    return resources.files("ddtree_tui").joinpath("data", BUILTIN[name]).read_text(encoding="utf-8")


def load_recording(ref: str | None) -> tuple[list[JsonObject], str]:
    """(frames, note) of a built-in recording name or a JSON-lines file path. Raises ReplayError."""
    ref = ref or "h200-under-load"
    if ref in BUILTIN:
        text, note = _builtin_text(ref), BUILTIN_NOTE
    else:
        p = Path(ref).expanduser()
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            known = ", ".join(BUILTIN)
            raise ReplayError(
                f"replay {ref!r}: not a built-in recording ({known}) nor a readable file: {e}"
            ) from None
        note = f"replay of {p.name} (not live)"
    frames: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise ReplayError(f"replay {ref!r} line {n}: not JSON: {e.msg}") from None
        if not isinstance(d, Mapping):
            raise ReplayError(f"replay {ref!r} line {n}: expected a JSON object")
        if "meta" in d:
            meta = d["meta"]
            if isinstance(meta, Mapping) and isinstance(meta.get("note"), str) and ref not in BUILTIN:
                note = meta["note"] + " (not live)"
            continue
        frames.append(dict(d))
    if not frames:
        raise ReplayError(f"replay {ref!r}: no frames")
    return frames, note


# --- building the built-in recording from the real fixtures ------------------------------------------------

_NUMERIC = ("util_gpu", "util_mem", "mem_used_mb", "temp_c", "power_w", "sm_clock_mhz")


def _lerp(a: GpuSample, b: GpuSample, f: float) -> dict[str, Any]:
    d = a.model_dump(
        exclude={"processes", "ts", "health", "fault", "fault_at", "service", "throttle_reasons"}
    )
    for k in _NUMERIC:
        va, vb = getattr(a, k), getattr(b, k)
        if va is None or vb is None:
            continue
        v = va + (vb - va) * f
        d[k] = round(v, 2) if k == "power_w" else round(v)
    return d


def build_builtin_recording(fixtures: Path) -> list[str]:
    """The JSON lines of "h200-under-load", made from tests/fixtures/gpu (deterministic)."""

    def rows(name: str) -> list[GpuSample]:
        text = (fixtures / name).read_text(encoding="utf-8")
        has_header = text.lstrip().startswith("index")
        return parse_query(text, None if has_header else DEFAULT_FIELDS).samples

    idle, before = rows("query-gpu-idle.csv"), rows("query-gpu-busy-nounits.csv")
    load, after = rows("query-gpu-under-load-nounits.csv"), rows("query-gpu-after.csv")
    procs = parse_apps((fixtures / "query-apps-under-load.csv").read_text(encoding="utf-8"))
    # one machine's identity for the whole loop: the one whose under-load rows and process we have
    ident = {g.index: {"uuid": g.uuid, "name": g.name, "pci_bus_id": g.pci_bus_id} for g in load}
    # (from, to, ticks): keyframes are real rows, the ticks between them are interpolated
    plan = [(idle, before, 8), (before, load, 4), (load, load, 24), (after, after, 1), (after, idle, 23)]
    meta = {
        "meta": {
            "note": BUILTIN_NOTE,
            "source": "nvidia-smi --query-gpu on 2 x NVIDIA H200, driver 580.159.04 (tests/fixtures/gpu)",
            "ticks": sum(n for _, _, n in plan),
            "interval_ms": 1000,
        }
    }
    out = [json.dumps(meta, separators=(",", ":"))]
    tick = 0
    for a_rows, b_rows, n in plan:
        for i in range(n):
            f = i / max(1, n - 1) if a_rows is not b_rows else 0.0
            gpus = []
            for a, b in zip(a_rows, b_rows, strict=True):
                d = _lerp(a, b, f) | ident[a.index]
                plist = []
                load_row = next(g for g in load if g.index == a.index)
                for p in procs.get(load_row.uuid or "", []):
                    if (d.get("mem_used_mb") or 0) > 1000:
                        share = p.used_memory_mb or 0
                        mem = round(share * d["mem_used_mb"] / (load_row.mem_used_mb or 1))
                        plist.append({"pid": p.pid, "name": p.name, "used_memory_mb": mem})
                d["processes"] = plist
                gpus.append(d)
            out.append(
                json.dumps(
                    {
                        "v": 1,
                        "t": tick,
                        "src": "replay",
                        "driver": "580.159.04",
                        "cuda": "13.0",
                        "gpus": gpus,
                    },
                    separators=(",", ":"),
                )
            )
            tick += 1
    return out


def main() -> None:  # pragma: no cover - a maintainer's tool: python -m ddtree_tui.telemetry.replay FIXTURES
    import sys

    src = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("tests/fixtures/gpu")
    dst = resources.files("ddtree_tui").joinpath("data", BUILTIN["h200-under-load"])
    Path(str(dst)).write_text("\n".join(build_builtin_recording(src)) + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    main()

"""NVML on this machine, in-process (nvidia-ml-py): the same collector the remote program uses, with handles
fetched once and reused. Every call here blocks (the driver can take its time): callers run these in a thread
(asyncio.to_thread), never on the event loop."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from ddtree_tui.lib.jsontypes import JsonObject
from ddtree_tui.remote.hoststats import proc_ancestors
from ddtree_tui.remote.sampler import NvmlCollector, NvmlUnavailable

__all__ = ["NvmlCollector", "NvmlUnavailable", "nvml_line", "open_nvml"]


def open_nvml(module: ModuleType | None = None) -> NvmlCollector:
    """nvmlInit + handles; raises NvmlUnavailable (its .no_gpu says "no NVIDIA driver/GPU here")."""
    return NvmlCollector(module)


def nvml_line(collector: NvmlCollector, with_processes: bool = True) -> JsonObject:
    """One tick in the sampler's line format (without host stats, which come from psutil locally)."""
    line: dict[str, Any] = {"v": 1, "t": round(time.time(), 3), "src": "nvml", "driver": collector.driver}
    if getattr(collector, "cuda", None):
        line["cuda"] = collector.cuda
    try:
        gpus = collector.sample(with_processes=with_processes)
    except Exception as e:  # a driver error outside one GPU: a fault to show, not a crash
        line["err"] = f"NVML: {e}"
        gpus = []
    line["gpus"] = gpus
    pids = {p["pid"] for g in gpus for p in g.get("processes", [])}
    if pids:
        line["anc"] = {str(p): proc_ancestors(p) for p in pids}
    return line

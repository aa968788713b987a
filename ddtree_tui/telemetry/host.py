"""This machine's host stats through psutil: CPU %, load, memory, disk free of the workdir, uptime."""

from __future__ import annotations

import os
import time

import psutil

from ddtree_tui.state import HostSample
from ddtree_tui.telemetry.sampler_program import nearest_existing

MIB = 1024 * 1024


class LocalHostStats:
    """psutil sampler; cpu_percent is measured between calls, so the first call is primed here."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        psutil.cpu_percent(interval=None)
        try:
            self.boot = psutil.boot_time()
        except Exception:
            self.boot = None

    def sample(self, ts: float | None = None) -> HostSample:
        ts = time.time() if ts is None else ts
        data: dict[str, object] = {"ts": ts, "cpu_percent": psutil.cpu_percent(interval=None)}
        try:
            data["load1"], data["load5"], data["load15"] = os.getloadavg()
        except (OSError, AttributeError):
            pass
        vm = psutil.virtual_memory()
        data["mem_total_mb"] = vm.total // MIB
        data["mem_used_mb"] = (vm.total - vm.available) // MIB
        try:
            du = psutil.disk_usage(nearest_existing(self.workdir))
            data["disk_free_mb"] = du.free // MIB
            data["disk_total_mb"] = du.total // MIB
        except OSError:
            pass
        if self.boot:
            data["uptime_s"] = round(ts - self.boot, 1)
        return HostSample.model_validate(data)

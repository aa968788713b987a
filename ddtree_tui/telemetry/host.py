"""This machine's host stats through psutil: CPU %, load, memory, disk free of the workdir, uptime."""

from __future__ import annotations

import os
import time

import psutil

from ddtree_tui.model.snapshot import HostSample
from ddtree_tui.remote.hoststats import nearest_existing

MIB = 1024 * 1024


MIN_CPU_WINDOW_S = 0.25  # a CPU % over less than this reads as 0 % on an idle-looking tick


def _busy_total(t: object) -> tuple[float, float]:
    """(busy, total) CPU seconds of a psutil cpu_times() reading; idle and iowait are not busy."""
    fields = t._asdict()  # type: ignore[attr-defined]
    total = float(sum(fields.values()))
    idle = float(fields.get("idle", 0.0)) + float(fields.get("iowait", 0.0))
    return total - idle, total


class LocalHostStats:
    """psutil sampler. CPU % is measured between this sampler's own readings (psutil's module-wide
    `cpu_percent(interval=None)` was reset by every other sampler, and the first sample right after the
    priming read said `cpu 0%` on a busy machine); a first sample waits until the window is long enough."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self._cpu = _busy_total(psutil.cpu_times())
        self._cpu_at = time.monotonic()
        try:
            self.boot = psutil.boot_time()
        except Exception:
            self.boot = None

    def sample(self, ts: float | None = None) -> HostSample:
        ts = time.time() if ts is None else ts
        data: dict[str, object] = {"ts": ts, "cpu_percent": self.cpu_percent()}
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

    def cpu_percent(self) -> float | None:
        """Busy share of all CPUs since the last call (runs in a worker thread: the short wait is fine)."""
        wait = MIN_CPU_WINDOW_S - (time.monotonic() - self._cpu_at)
        if wait > 0:
            time.sleep(wait)
        now = _busy_total(psutil.cpu_times())
        busy, total = now[0] - self._cpu[0], now[1] - self._cpu[1]
        self._cpu, self._cpu_at = now, time.monotonic()
        if total <= 0:
            return None
        return round(max(0.0, min(100.0, busy / total * 100.0)), 1)

"""Bounded history per GPU per metric, for sparklines: memory does not grow with uptime."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from ddtree_tui.model.snapshot import GpuSample

METRICS = ("util_gpu", "mem_used_mb", "power_w", "temp_c")
MAX_GPUS = 64  # a bound on the number of series too, whatever a broken host reports


class GpuHistory:
    """The last `maxlen` values per (GPU index, metric).

    Kept as packed doubles (array('d'), 8 bytes a value) rather than a deque of float objects (about 32):
    16 hosts x 8 GPUs x 4 metrics x 600 samples is 2.5 MB instead of ~10 MB, filled over the first 10
    minutes of uptime. Dropping the oldest value moves maxlen * 8 bytes: cheap at 1 Hz.
    """

    def __init__(self, maxlen: int = 600) -> None:
        self.maxlen = max(1, int(maxlen))
        self._series: dict[tuple[int, str], array[float]] = {}

    def add(self, gpus: Iterable[GpuSample]) -> None:
        """Append one tick; missing values and faulted GPUs add nothing (a gap, not a fake zero)."""
        for g in gpus:
            if g.health != "ok":
                continue
            for m in METRICS:
                v = getattr(g, m)
                if v is None:
                    continue
                key = (g.index, m)
                buf = self._series.get(key)
                if buf is None:
                    if len({i for i, _ in self._series}) >= MAX_GPUS and g.index not in self.indexes():
                        break
                    buf = self._series[key] = array("d")
                buf.append(float(v))
                if len(buf) > self.maxlen:
                    del buf[: len(buf) - self.maxlen]

    def series(self, gpu_index: int, metric: str) -> list[float]:
        """Oldest first; empty for an unknown GPU or metric."""
        if metric not in METRICS:
            raise KeyError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
        buf = self._series.get((gpu_index, metric))
        return buf.tolist() if buf is not None else []

    def indexes(self) -> list[int]:
        return sorted({i for i, _ in self._series})

    def clear(self) -> None:
        self._series.clear()

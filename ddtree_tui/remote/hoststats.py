"""Host stats from /proc (Linux) for the sampler: parsers the client reuses on the shell sampler's output.

A helper of remote/sampler.py, carried in its bundle; stdlib only, Python >= 3.7.
"""

from __future__ import annotations

import os
from typing import Any

MIB = 1024 * 1024


def read_text(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def parse_cpu_times(stat_text: str | None) -> tuple[int, int] | None:
    """(busy, total) jiffies from the first line of /proc/stat."""
    if not stat_text:
        return None
    first = stat_text.split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        return None
    try:
        vals = [int(v) for v in first[1:]]
    except ValueError:
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    total = sum(vals[:8])
    return total - idle, total


def cpu_percent(prev: tuple[int, int] | None, cur: tuple[int, int] | None) -> float | None:
    if not prev or not cur:
        return None
    dt = cur[1] - prev[1]
    if dt <= 0:
        return None
    return round(max(0.0, min(100.0, 100.0 * (cur[0] - prev[0]) / dt)), 1)


def parse_meminfo(text: str | None) -> tuple[int | None, int | None]:
    """(used_mb, total_mb) the way `free` counts: total - available."""
    if not text:
        return None, None
    kv = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            try:
                kv[parts[0][:-1]] = int(parts[1])
            except ValueError:
                pass
    total = kv.get("MemTotal")
    avail = kv.get("MemAvailable")
    if avail is None and total is not None:
        avail = kv.get("MemFree", 0) + kv.get("Buffers", 0) + kv.get("Cached", 0)
    if total is None:
        return None, None
    return (total - (avail or 0)) // 1024, total // 1024


def parse_loadavg(text: str | None) -> tuple[float | None, float | None, float | None]:
    try:
        a, b, c = (float(x) for x in (text or "").split()[:3])
        return a, b, c
    except ValueError:
        return None, None, None


def parse_uptime(text: str | None) -> float | None:
    try:
        return float((text or "").split()[0])
    except (ValueError, IndexError):
        return None


def nearest_existing(path: str) -> str:
    """The path itself or its nearest existing parent: a workdir that is not created yet still has a disk."""
    p = os.path.abspath(os.path.expanduser(path or "/"))
    while not os.path.exists(p) and p != os.path.dirname(p):
        p = os.path.dirname(p)
    return p


def disk_mb(path: str) -> tuple[int | None, int | None]:
    """(free_mb, total_mb) of the filesystem holding path (free for an unprivileged user)."""
    try:
        st = os.statvfs(nearest_existing(path))
    except OSError:
        return None, None
    return st.f_bavail * st.f_frsize // MIB, st.f_blocks * st.f_frsize // MIB


def host_dict(
    cpu_pct: float | None,
    load: tuple[float | None, float | None, float | None],
    mem: tuple[int | None, int | None],
    disk: tuple[int | None, int | None],
    uptime_s: float | None,
) -> dict[str, Any]:
    """The sampler line's "host" part (HostSample's fields): one shape for /proc here and the shell sampler."""
    return {
        "cpu_percent": cpu_pct,
        "load1": load[0],
        "load5": load[1],
        "load15": load[2],
        "mem_used_mb": mem[0],
        "mem_total_mb": mem[1],
        "disk_free_mb": disk[0],
        "disk_total_mb": disk[1],
        "uptime_s": uptime_s,
    }


class ProcHost:
    """Host stats from /proc (Linux); fields it cannot read stay None."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.prev = parse_cpu_times(read_text("/proc/stat"))

    def sample(self) -> dict[str, Any]:
        cur = parse_cpu_times(read_text("/proc/stat"))
        pct = cpu_percent(self.prev, cur)
        self.prev = cur or self.prev
        used, total = parse_meminfo(read_text("/proc/meminfo"))
        l1, l5, l15 = parse_loadavg(read_text("/proc/loadavg"))
        if l1 is None and hasattr(os, "getloadavg"):
            try:
                l1, l5, l15 = os.getloadavg()
            except OSError:
                pass
        free, dtotal = disk_mb(self.workdir)
        return host_dict(
            pct, (l1, l5, l15), (used, total), (free, dtotal), parse_uptime(read_text("/proc/uptime"))
        )


def proc_ancestors(pid: int, depth: int = 8) -> list[int]:
    """Parent chain of pid (nearest first), so a GPU process can be matched to the service that spawned it."""
    out: list[int] = []
    cur = pid
    for _ in range(depth):
        text = read_text(f"/proc/{cur}/stat")
        if not text:
            break
        try:
            ppid = int(text.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            break
        if ppid <= 1:
            break
        out.append(ppid)
        cur = ppid
    return out


def proc_name(pid: int) -> str | None:
    text = read_text(f"/proc/{pid}/comm")
    return text.strip() if text else None


class ProcInfo:
    """What nvitop shows of a GPU process, from /proc: user, CPU % (between two ticks), host memory (RSS),
    elapsed time, the full command line and the parent pid (the UI draws the tree under a service)."""

    def __init__(self) -> None:
        self.prev: dict[int, tuple[float, float]] = {}  # pid -> (cpu seconds, when read)
        self.hz = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def read(self, pid: int, now: float) -> dict[str, Any] | None:
        stat = read_text(f"/proc/{pid}/stat")
        if not stat:
            return None
        try:
            fields = stat.rsplit(")", 1)[1].split()
            ppid, utime, stime, start = int(fields[1]), int(fields[11]), int(fields[12]), int(fields[19])
        except (IndexError, ValueError):
            return None
        cpu_s = (utime + stime) / self.hz
        out: dict[str, Any] = {"ppid": ppid}
        prev = self.prev.get(pid)
        self.prev[pid] = (cpu_s, now)
        if prev is not None and now > prev[1]:
            out["cpu_percent"] = round(max(0.0, (cpu_s - prev[0]) / (now - prev[1]) * 100), 1)
        up = parse_uptime(read_text("/proc/uptime"))
        if up is not None:
            out["elapsed_s"] = round(max(0.0, up - start / self.hz), 1)
        statm = read_text(f"/proc/{pid}/statm")
        if statm:
            try:
                out["host_mem_mb"] = int(statm.split()[1]) * self.page // MIB
            except (IndexError, ValueError):
                pass
        out["user"] = proc_user(pid)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read(4096)
            cmd = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
            out["command"] = cmd or None
        except OSError:
            pass
        return out

    def forget_except(self, pids: set[int]) -> None:
        for gone in set(self.prev) - pids:
            del self.prev[gone]


def proc_user(pid: int) -> str | None:
    """The login name of the process's real uid (the uid as text when it has no name)."""
    status = read_text(f"/proc/{pid}/status") or ""
    for line in status.splitlines():
        if line.startswith("Uid:"):
            try:
                uid = int(line.split()[1])
            except (IndexError, ValueError):
                return None
            try:
                import pwd

                return pwd.getpwuid(uid).pw_name
            except (ImportError, KeyError):
                return str(uid)
    return None

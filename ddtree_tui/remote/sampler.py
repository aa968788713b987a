"""The GPU/host sampler that runs ON a host: `python -u -c <this source> --interval-ms N`.

One long-lived process per host, one JSON line per tick on stdout: host stats from /proc and GPUs from NVML
(pynvml / nvidia-ml-py) when it imports, else the raw rows of a streamed `nvidia-smi --query-gpu ... -lms N`
(parsed on the client by one tested parser), else one-shot nvidia-smi queries. Faults are data in the line
("err", a GPU's "fault"), never a crash. It exits when stdout breaks (EPIPE), when stdin reaches EOF (only with
--stdin-eof-exit), or when its parent goes away, so it dies with the SSH channel.

Stdlib only and Python >= 3.7 compatible: it runs with whatever Python the host has. The client imports this
module too (the NVML collector and the /proc parsers), so there is one copy of that code.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

PROTOCOL = 1
# What we ask nvidia-smi for; each entry lists accepted spellings, the first one the driver knows is used.
SMI_FIELDS = [
    ("index",),
    ("uuid",),
    ("name",),
    ("pci.bus_id",),
    ("driver_version",),
    ("pstate",),
    ("temperature.gpu",),
    ("utilization.gpu",),
    ("utilization.memory",),
    ("memory.total",),
    ("memory.used",),
    ("power.draw",),
    ("power.limit",),
    ("clocks.sm", "clocks.current.sm"),
    ("clocks_event_reasons.active", "clocks_throttle_reasons.active"),
]
SMI_MINIMAL = ["index", "uuid", "name", "memory.total", "memory.used", "utilization.gpu"]
SMI_APPS = "pid,process_name,used_memory,gpu_uuid,gpu_bus_id"
MIB = 1024 * 1024

# NVML error codes that mean "this value is not available here" rather than "this GPU is broken".
_NVML_MISSING = {3, 4, 6, 13}  # NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, FUNCTION_NOT_FOUND
_NVML_NO_DRIVER = {9, 12}  # DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND


# --- host stats from /proc ---------------------------------------------------------------------------------


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


class ProcHost:
    """Host stats from /proc (Linux); fields it cannot read stay None."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.prev = parse_cpu_times(read_text("/proc/stat"))

    def sample(self) -> dict:
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
        return {
            "cpu_percent": pct,
            "load1": l1,
            "load5": l5,
            "load15": l15,
            "mem_used_mb": used,
            "mem_total_mb": total,
            "disk_free_mb": free,
            "disk_total_mb": dtotal,
            "uptime_s": parse_uptime(read_text("/proc/uptime")),
        }


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


# --- NVML ---------------------------------------------------------------------------------------------------


def _s(v: object) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


class NvmlUnavailable(Exception):
    """NVML cannot be used here; `no_gpu` says whether that means "no NVIDIA driver/GPU" at all."""

    def __init__(self, msg: str, no_gpu: bool) -> None:
        super().__init__(msg)
        self.no_gpu = no_gpu


class NvmlCollector:
    """NVML sampling with handles fetched once and reused; per-GPU errors become that GPU's fault."""

    def __init__(self, nv: object = None) -> None:
        if nv is None:
            try:
                import pynvml as nv  # nvidia-ml-py (or the old pynvml package): same module name
            except Exception as e:
                raise NvmlUnavailable(f"pynvml not importable: {e}", no_gpu=False) from None
        self.nv = nv
        try:
            nv.nvmlInit()
        except Exception as e:
            code = getattr(e, "value", None)
            raise NvmlUnavailable(str(e) or type(e).__name__, no_gpu=code in _NVML_NO_DRIVER) from None
        self.driver = None
        try:
            self.driver = _s(nv.nvmlSystemGetDriverVersion())
        except Exception:
            pass
        self.cuda = None  # the CUDA version the driver supports (what nvidia-smi's header shows)
        for fn in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            try:
                self.cuda = cuda_text(getattr(nv, fn)())
                break
            except Exception:
                continue
        self.count = int(nv.nvmlDeviceGetCount())
        self.handles: list = [None] * self.count
        self.static: list[dict] = [{} for _ in range(self.count)]
        self.handle_err: list[str | None] = [None] * self.count
        self.v2 = hasattr(nv, "nvmlMemory_v2")
        self.ticks = 0
        for i in range(self.count):
            self._get_handle(i)

    def _get_handle(self, i: int) -> None:
        nv = self.nv
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
        except Exception as e:
            self.handle_err[i] = f"Unable to determine the device handle for GPU {i}: {e}"
            return
        st: dict = {}
        for key, fn in (("uuid", "nvmlDeviceGetUUID"), ("name", "nvmlDeviceGetName")):
            try:
                st[key] = _s(getattr(nv, fn)(h))
            except Exception:
                st[key] = None
        try:
            st["pci_bus_id"] = _s(nv.nvmlDeviceGetPciInfo(h).busId)
        except Exception:
            st["pci_bus_id"] = None
        self.handles[i] = h
        self.static[i] = st
        self.handle_err[i] = None

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except Exception:
            pass

    def _mem(self, h: object) -> object:
        nv = self.nv
        if self.v2:
            try:
                return nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
            except TypeError:  # an old binding without the version argument
                self.v2 = False
            except Exception as e:
                if getattr(e, "value", None) not in (13, 2, 25):  # function missing / bad version: use v1
                    raise
                self.v2 = False
        return nv.nvmlDeviceGetMemoryInfo(h)

    def sample(self, with_processes: bool = True) -> list[dict]:
        """One dict per GPU, keys as GpuSample's (plus throttle_mask); a broken GPU gets 'fault'."""
        self.ticks += 1
        out = []
        for i in range(self.count):
            if self.handles[i] is None and self.ticks % 10 == 0:
                self._get_handle(i)
            h = self.handles[i]
            g: dict = {"index": i}
            g.update(self.static[i])
            if h is None:
                g["fault"] = self.handle_err[i]
                out.append(g)
                continue
            try:
                self._sample_one(h, g, with_processes)
            except _GpuFault as e:
                g["fault"] = str(e)
            out.append(g)
        return out

    def _call(self, fn: str, *args: object) -> object:
        try:
            return getattr(self.nv, fn)(*args)
        except AttributeError:
            return None
        except Exception as e:
            code = getattr(e, "value", None)
            if code in _NVML_MISSING:
                return None
            raise _GpuFault(str(e) or type(e).__name__) from None

    def _sample_one(self, h: object, g: dict, with_processes: bool) -> None:
        nv = self.nv
        util = self._call("nvmlDeviceGetUtilizationRates", h)
        g["util_gpu"] = getattr(util, "gpu", None)
        g["util_mem"] = getattr(util, "memory", None)
        try:
            mem = self._mem(h)
        except Exception as e:
            if getattr(e, "value", None) not in _NVML_MISSING:
                raise _GpuFault(str(e) or type(e).__name__) from None
            mem = None
        g["mem_used_mb"] = int(mem.used // MIB) if mem is not None else None
        g["mem_total_mb"] = int(mem.total // MIB) if mem is not None else None
        g["temp_c"] = self._call("nvmlDeviceGetTemperature", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        pw = self._call("nvmlDeviceGetPowerUsage", h)
        g["power_w"] = round(pw / 1000.0, 2) if pw is not None else None
        pl = self._call("nvmlDeviceGetEnforcedPowerLimit", h)
        g["power_limit_w"] = round(pl / 1000.0, 2) if pl is not None else None
        g["sm_clock_mhz"] = self._call("nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1))
        ps = self._call("nvmlDeviceGetPerformanceState", h)
        g["pstate"] = f"P{ps}" if isinstance(ps, int) and 0 <= ps < 32 else None
        fn = "nvmlDeviceGetCurrentClocksEventReasons"
        if not hasattr(nv, fn):
            fn = "nvmlDeviceGetCurrentClocksThrottleReasons"
        mask = self._call(fn, h)
        g["throttle_mask"] = int(mask) if mask is not None else None
        if with_processes:
            procs = self._call("nvmlDeviceGetComputeRunningProcesses", h) or []
            plist = []
            for p in procs:
                pid = int(getattr(p, "pid", 0) or 0)
                used = getattr(p, "usedGpuMemory", None)
                plist.append(
                    {
                        "pid": pid,
                        "name": proc_name(pid),
                        "used_memory_mb": int(used // MIB) if isinstance(used, int) and used >= 0 else None,
                    }
                )
            g["processes"] = plist


class _GpuFault(Exception):
    pass


# --- nvidia-smi ---------------------------------------------------------------------------------------------


def parse_help_fields(text: str) -> set:
    """Every field name `nvidia-smi --help-query-gpu` lists (lines like `"name" or "gpu_name"`)."""
    names = set()
    for line in text.splitlines():
        if line.startswith('"'):
            names.update(re.findall(r'"([A-Za-z0-9_.]+)"', line))
    return names


def pick_fields(valid: set | None) -> list[str]:
    """Our field list restricted to what this driver knows (one bad field fails the whole query)."""
    if not valid:
        return [alts[0] for alts in SMI_FIELDS]
    out = []
    for alts in SMI_FIELDS:
        for a in alts:
            if a in valid:
                out.append(a)
                break
    return out if "index" in out else list(SMI_MINIMAL)


def _pdeathsig() -> None:
    """Child dies with us even if we are SIGKILLed (Linux); harmless elsewhere."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def run_smi(args: list[str], timeout: float) -> tuple[int | None, str]:
    """(exit status, stdout+stderr) of one nvidia-smi run; None status when it is missing or hangs."""
    try:
        p = subprocess.run(
            ["nvidia-smi", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            preexec_fn=_pdeathsig,
        )
    except FileNotFoundError:
        return None, "nvidia-smi: command not found"
    except subprocess.TimeoutExpired:
        return None, f"nvidia-smi did not answer within {timeout:.0f} s"
    except OSError as e:
        return None, f"nvidia-smi: {e}"
    return p.returncode, p.stdout.decode(errors="replace")


_CUDA_RE = re.compile(r"CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)")


def cuda_text(v: object) -> str | None:
    """NVML's CUDA driver version (e.g. 13000) as nvidia-smi prints it ("13.0")."""
    if isinstance(v, int) and v > 0:
        return str(v // 1000) + "." + str((v % 1000) // 10)
    return None


def cuda_from_smi(text: str) -> str | None:
    """The `CUDA Version: 13.0` of plain nvidia-smi's header."""
    m = _CUDA_RE.search(text or "")
    return m.group(1) if m else None


_HOST_FAULT_RE = re.compile(r"No devices were found|NVIDIA-SMI has failed|Failed to initialize NVML")


def is_row(line: str) -> bool:
    return bool(re.match(r"^\s*\d+\s*,", line))


class SmiStream:
    """`nvidia-smi --query-gpu=F --format=csv,noheader,nounits -lms N` kept running; rows grouped by tick."""

    def __init__(self, fields: list[str], interval_ms: int) -> None:
        self.fields = fields
        self.interval_ms = interval_ms
        self.lock = threading.Lock()
        self.group: list[str] = []
        self.errs: list[str] = []
        self.complete: list[str] | None = None
        self.complete_errs: list[str] = []
        self.expected = 0
        self.seq = 0
        self.rows_seen = 0
        self.output: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.start_error: str | None = None
        try:
            self.proc = subprocess.Popen(
                [
                    "nvidia-smi",
                    "--query-gpu=" + ",".join(fields),
                    "--format=csv,noheader,nounits",
                    "-lms",
                    str(interval_ms),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_pdeathsig,
            )
        except OSError as e:
            self.start_error = "nvidia-smi: %s" % (e.strerror or e)
            return
        t = threading.Thread(target=self._read, daemon=True)
        t.start()

    def _finish_group(self) -> None:
        if self.group or self.errs:
            self.complete = self.group
            self.complete_errs = self.errs
            self.expected = max(self.expected, len(self.group))
            self.seq += 1
        self.group, self.errs = [], []

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        last_index = -1
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            with self.lock:
                if not is_row(line):  # what it said besides rows: the reason when it dies
                    self.output = [*self.output[-19:], line]
                if is_row(line):
                    idx = int(line.split(",", 1)[0])
                    if idx <= last_index:
                        self._finish_group()
                    last_index = idx
                    self.group.append(line)
                    self.rows_seen += 1
                    if self.expected and len(self.group) >= self.expected:
                        self._finish_group()
                        last_index = -1
                else:
                    if _HOST_FAULT_RE.search(line):  # the whole source failed: not part of this tick's rows
                        self._finish_group()
                        last_index = -1
                    self.errs.append(line)
        with self.lock:
            self._finish_group()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def take(self) -> tuple[int, list[str] | None, list[str]]:
        with self.lock:
            return self.seq, self.complete, list(self.complete_errs)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
                self.proc.wait(2)
            except Exception:
                pass


class SmiSource:
    """GPU rows from nvidia-smi: streamed with -lms, or one-shot per tick when streaming does not work."""

    def __init__(self, interval_ms: int, oneshot: bool, backoff_max_s: float) -> None:
        self.interval_ms = interval_ms
        self.oneshot = oneshot
        self.backoff_max_s = backoff_max_s
        self.fields: list[str] | None = None
        self.stream: SmiStream | None = None
        self.last_seq = 0
        self.last_new = time.monotonic()
        self.retry_at = 0.0
        self.failures = 0
        self.apps: list[str] = []
        self.apps_at = 0.0
        self.err: str | None = None
        self.driver: str | None = None
        self.cuda: str | None = None
        self.cuda_asked = False

    def cuda_version(self) -> str | None:
        """Asked once: plain nvidia-smi's header names the CUDA version (no --query field has it)."""
        if not self.cuda_asked:
            self.cuda_asked = True
            status, text = run_smi([], 10.0)
            if status == 0:
                self.cuda = cuda_from_smi(text)
        return self.cuda

    @property
    def name(self) -> str:
        return "nvidia-smi-oneshot" if self.oneshot else "nvidia-smi"

    def _timeout(self) -> float:
        return max(3.0, 2 * self.interval_ms / 1000.0)

    def _ensure_fields(self) -> str | None:
        if self.fields is not None:
            return None
        rc, out = run_smi(["--help-query-gpu"], self._timeout())
        if rc is None and "not found" in out:
            return out
        self.fields = pick_fields(parse_help_fields(out) if rc == 0 else None)
        return None

    def _backoff(self, err: str) -> None:
        self.failures += 1
        self.err = err
        delay = min(self.backoff_max_s, 0.5 * (2 ** min(self.failures, 10)))
        self.retry_at = time.monotonic() + delay

    def _apps(self, now: float) -> None:
        if now < self.apps_at:
            return
        self.apps_at = now + max(self.interval_ms / 1000.0, 5.0)
        rc, out = run_smi(
            ["--query-compute-apps=" + SMI_APPS, "--format=csv,noheader,nounits"], self._timeout()
        )
        self.apps = [ln for ln in out.splitlines() if ln.strip()] if rc == 0 else []

    def sample(self) -> dict:
        """{"fields", "rows", "errs", "apps"}; self.err says why there is nothing (or stale data)."""
        now = time.monotonic()
        if now < self.retry_at:
            return {}
        err = self._ensure_fields()
        if err:
            self._backoff(err)
            return {}
        assert self.fields is not None
        if self.oneshot:
            return self._sample_oneshot(now)
        if self.stream is None or not self.stream.alive():
            if self.stream is not None:
                out = "\n".join(self.stream.output).strip()
                seen = self.stream.rows_seen
                self.stream.stop()
                self.stream = None
                if "is not a valid field" in out and self.fields != SMI_MINIMAL:
                    self.fields = list(SMI_MINIMAL)
                elif not seen and not out:
                    # -lms not supported or it exits at once: ask once per tick instead
                    self.oneshot = True
                    return self._sample_oneshot(now)
                else:
                    self._backoff(out or "nvidia-smi exited")
                    return {"fields": self.fields, "rows": [], "errs": out.splitlines()[-5:]}
            self.stream = SmiStream(self.fields, self.interval_ms)
            if self.stream.start_error:
                err = self.stream.start_error
                self.stream = None
                self._backoff(err)
                return {}
            self.last_new = now
            self.last_seq = 0
            self.apps_at = 0.0  # a new stream: ask for the processes at once too
        seq, rows, errs = self.stream.take()
        self._apps(now)
        if seq != self.last_seq:
            self.last_seq = seq
            self.last_new = now
            self.failures = 0
            self.err = None
            return {"fields": self.fields, "rows": rows or [], "errs": errs, "apps": self.apps}
        if now - self.last_new > 3 * self.interval_ms / 1000.0 + 2.0:
            self.stream.stop()
            self._backoff("nvidia-smi stopped answering")
            self.stream = None
        return {"stale": True}

    def _sample_oneshot(self, now: float) -> dict:
        assert self.fields is not None
        rc, out = run_smi(
            ["--query-gpu=" + ",".join(self.fields), "--format=csv,noheader,nounits"], self._timeout()
        )
        lines = [ln for ln in out.splitlines() if ln.strip()]
        if rc != 0 and "is not a valid field" in out and self.fields != SMI_MINIMAL:
            self.fields = list(SMI_MINIMAL)
            return self._sample_oneshot(now)
        rows = [ln for ln in lines if is_row(ln)]
        errs = [ln for ln in lines if not is_row(ln)]
        if rc != 0 and not rows:
            self._backoff(out.strip() or f"nvidia-smi exit status {rc}")
            return {"fields": self.fields, "rows": [], "errs": errs[-5:]}
        self.failures = 0
        self.err = None
        self._apps(now)
        return {"fields": self.fields, "rows": rows, "errs": errs, "apps": self.apps}

    def stop(self) -> None:
        if self.stream is not None:
            self.stream.stop()


# --- the program --------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> dict:
    opts = {
        "interval_ms": 1000,
        "mode": "auto",
        "count": 0,
        "workdir": "/",
        "backoff_max_ms": 30000,
        "stdin_eof_exit": False,
    }
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--stdin-eof-exit":
            opts["stdin_eof_exit"] = True
        elif a in ("--interval-ms", "--mode", "--count", "--workdir", "--backoff-max-ms") and i + 1 < len(
            argv
        ):
            key = a[2:].replace("-", "_")
            val = argv[i + 1]
            opts[key] = val if key in ("mode", "workdir") else int(val)
            i += 1
        i += 1
    opts["interval_ms"] = max(50, int(opts["interval_ms"]))
    return opts


class Sampler:
    """Picks the GPU source once (NVML, else nvidia-smi, else none) and builds one line per tick."""

    def __init__(self, opts: dict) -> None:
        self.opts = opts
        self.host = ProcHost(opts["workdir"])
        self.nvml: NvmlCollector | None = None
        self.smi: SmiSource | None = None
        self.note: str | None = None
        self.no_gpu = False
        mode = opts["mode"]
        nvml_err = None
        if mode in ("auto", "nvml"):
            try:
                self.nvml = NvmlCollector()
            except NvmlUnavailable as e:
                nvml_err = str(e)
                self.no_gpu = e.no_gpu
            except Exception as e:
                nvml_err = f"NVML: {e}"
        if self.nvml is None and mode in ("auto", "nvidia-smi", "oneshot"):
            self.smi = SmiSource(
                opts["interval_ms"],
                oneshot=mode == "oneshot" or opts["count"] == 1,
                backoff_max_s=opts["backoff_max_ms"] / 1000.0,
            )
            self.note = nvml_err
        elif self.nvml is None:
            self.note = nvml_err
        self.ticks = 0

    def tick(self) -> dict:
        self.ticks += 1
        line: dict = {"v": PROTOCOL, "t": round(time.time(), 3), "host": self.host.sample()}
        if self.nvml is not None:
            line["src"] = "nvml"
            line["driver"] = self.nvml.driver
            if self.nvml.cuda:
                line["cuda"] = self.nvml.cuda
            try:
                gpus = self.nvml.sample()
            except Exception as e:  # never let one bad tick end the stream
                gpus = []
                line["err"] = f"NVML: {e}"
            line["gpus"] = gpus
            pids = [p["pid"] for g in gpus for p in g.get("processes", [])]
        elif self.smi is not None:
            smi = self.smi.sample()
            line["src"] = self.smi.name
            if smi.get("stale"):
                line["stale"] = True
            elif smi:
                line["smi"] = smi
                cuda = self.smi.cuda_version()
                if cuda:
                    line["cuda"] = cuda
            if self.smi.err:
                if "command not found" in self.smi.err:  # neither NVML nor nvidia-smi: no NVIDIA GPU here
                    line["src"] = "none"
                    line["note"] = "no NVIDIA GPU"
                else:
                    line["err"] = self.smi.err
            pids = []
            for row in smi.get("apps") or []:
                try:
                    pids.append(int(row.split(",", 1)[0]))
                except ValueError:
                    pass
        else:
            line["src"] = "none"
            if self.opts["mode"] == "none":
                line["note"] = "GPU telemetry off in the profile"
            elif self.no_gpu:
                line["note"] = "no NVIDIA GPU"
            else:
                line["err"] = self.note or "no GPU source"
            pids = []
        if self.note and "note" not in line and line["src"] != "none":
            line["note"] = self.note
        if pids:
            line["anc"] = {str(p): proc_ancestors(p) for p in set(pids)}
        return line

    def close(self) -> None:
        if self.smi is not None:
            self.smi.stop()
        if self.nvml is not None:
            self.nvml.close()


def _watch_stdin(stop: threading.Event) -> None:
    try:
        while True:
            if not os.read(0, 4096):
                break
    except OSError:
        pass
    stop.set()


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    interval = opts["interval_ms"] / 1000.0
    stop = threading.Event()
    if opts["stdin_eof_exit"]:
        threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
    parent = os.getppid()
    sampler = Sampler(opts)
    out = sys.stdout
    try:
        n = 0
        next_at = time.monotonic()
        if opts["count"] == 1:
            time.sleep(min(0.2, interval))  # a first CPU% needs two /proc/stat reads
        while not stop.is_set():
            line = sampler.tick()
            try:
                out.write(json.dumps(line, separators=(",", ":")) + "\n")
                out.flush()
            except (BrokenPipeError, OSError):
                return 0
            n += 1
            if opts["count"] and n >= opts["count"]:
                return 0
            if os.getppid() != parent:  # our channel's shell/sshd went away
                return 0
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < 0:  # late (slow tick): skip ahead instead of bursting
                next_at = time.monotonic()
                delay = 0
            stop.wait(delay)
        return 0
    finally:
        sampler.close()


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except KeyboardInterrupt:
        code = 0
    try:
        sys.stdout.flush()
    except Exception:
        pass
    os._exit(code)

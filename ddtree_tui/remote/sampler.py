"""The GPU/host sampler that runs ON a host: `python -u -c <this source> --interval-ms N`.

One long-lived process per host, one JSON line per tick on stdout: host stats from /proc and GPUs from NVML
(pynvml / nvidia-ml-py) when it imports, else the raw rows of a streamed `nvidia-smi --query-gpu ... -lms N`
(parsed on the client by one tested parser), else one-shot nvidia-smi queries. Faults are data in the line
("err", a GPU's "fault"), never a crash. It exits when stdout breaks (EPIPE), when stdin reaches EOF (only with
--stdin-eof-exit), or when its parent goes away, so it dies with the SSH channel.

Stdlib only and Python >= 3.7 compatible: it runs with whatever Python the host has. The /proc stats
(remote/hoststats.py) and nvidia-smi (remote/smi.py) are helper modules that travel in its bundle
(`ddtree_tui.remote.source`). The client imports these modules too (the NVML collector, the /proc parsers, the
nvidia-smi field list), so there is one copy of that code.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from ddtree_tui.remote.hoststats import MIB, ProcHost, ProcInfo, proc_ancestors, proc_name
from ddtree_tui.remote.smi import SmiSource, cuda_text

PROTOCOL = 1

# NVML error codes that mean "this value is not available here" rather than "this GPU is broken".
_NVML_MISSING = {3, 4, 6, 13}  # NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, FUNCTION_NOT_FOUND
_NVML_NO_DRIVER = {9, 12}  # DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND


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

    def __init__(self, nv: Any = None) -> None:
        """`nv`: the pynvml module (or a fake in tests); Any because the binding is generated at run time."""
        if nv is None:
            try:
                import pynvml  # nvidia-ml-py (or the old pynvml package): same module name
            except Exception as e:
                raise NvmlUnavailable(f"pynvml not importable: {e}", no_gpu=False) from None
            nv = pynvml
        self.nv: Any = nv
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
        self.handles: list[Any] = [None] * self.count
        self.static: list[dict[str, Any]] = [{} for _ in range(self.count)]
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
        st: dict[str, Any] = {}
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

    def _mem(self, h: object) -> Any:
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

    def sample(self, with_processes: bool = True) -> list[dict[str, Any]]:
        """One dict per GPU, keys as GpuSample's (plus throttle_mask); a broken GPU gets 'fault'."""
        self.ticks += 1
        out = []
        for i in range(self.count):
            if self.handles[i] is None and self.ticks % 10 == 0:
                self._get_handle(i)
            h = self.handles[i]
            g: dict[str, Any] = {"index": i}
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

    def _call(self, fn: str, *args: object) -> Any:
        try:
            return getattr(self.nv, fn)(*args)
        except AttributeError:
            return None
        except Exception as e:
            code = getattr(e, "value", None)
            if code in _NVML_MISSING:
                return None
            raise _GpuFault(str(e) or type(e).__name__) from None

    def _sample_one(self, h: object, g: dict[str, Any], with_processes: bool) -> None:
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


# --- the program --------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
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

    def __init__(self, opts: dict[str, Any]) -> None:
        self.opts = opts
        self.host = ProcHost(opts["workdir"])
        self.procs = ProcInfo()
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

    def tick(self) -> dict[str, Any]:
        self.ticks += 1
        line: dict[str, Any] = {"v": PROTOCOL, "t": round(time.time(), 3), "host": self.host.sample()}
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
            now = time.monotonic()
            info = {str(p): self.procs.read(p, now) for p in set(pids)}
            line["procs"] = {k: v for k, v in info.items() if v is not None}
        self.procs.forget_except(set(pids))
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

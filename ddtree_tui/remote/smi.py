"""nvidia-smi for the sampler: the query fields, one-shot runs and the streamed `-lms` source.

A helper of remote/sampler.py, carried in its bundle; the client reuses the field lists and the help parser.
Stdlib only, Python >= 3.7.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from typing import Any

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


def parse_help_fields(text: str) -> set[str]:
    """Every field name `nvidia-smi --help-query-gpu` lists (lines like `"name" or "gpu_name"`)."""
    names = set()
    for line in text.splitlines():
        if line.startswith('"'):
            names.update(re.findall(r'"([A-Za-z0-9_.]+)"', line))
    return names


def pick_fields(valid: set[str] | None) -> list[str]:
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
        self.proc: subprocess.Popen[bytes] | None = None
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

    def sample(self) -> dict[str, Any]:
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

    def _sample_oneshot(self, now: float) -> dict[str, Any]:
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

"""A simulated server in a child process (for tests, benchmarks and the demo), stopped however we leave.

A child process, unlike the in-process SimServer, does not share the event loop or the CPU time of the
client being measured, and can really exit (the `exit` fault).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import IO

from ddtree_tui.sim.config import SimConfig


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def sim_argv(cfg: SimConfig, port: int) -> list[str]:
    argv = [sys.executable, "-m", "ddtree_tui.cli", "sim", "--algorithm", cfg.algorithm, "--port", str(port)]
    argv += ["--host", cfg.host, "--decode-rate", repr(cfg.decode_rate), "--load-time", repr(cfg.load_time)]
    argv += ["--seed", str(cfg.seed), "--model-path", cfg.model_path]
    argv += ["--decode-log-interval", str(cfg.decode_log_interval)]
    if cfg.mode:
        argv += ["--mode", cfg.mode]
    if cfg.accept_length is not None:
        argv += ["--accept-length", repr(cfg.accept_length)]
    if cfg.incremental_streaming_output:
        argv.append("--incremental-streaming-output")
    for f in cfg.faults:
        argv += ["--fault", f]
    # the real server's behaviours (SimConfig's selectable ones)
    if cfg.health_latency:
        argv += ["--health-latency", repr(cfg.health_latency)]
    if cfg.prefill_rate:
        argv += ["--prefill-rate", repr(cfg.prefill_rate)]
    if cfg.kv_capacity:
        argv += ["--kv-capacity", str(cfg.kv_capacity)]
    if cfg.max_running_requests:
        argv += ["--max-running-requests", str(cfg.max_running_requests)]
    if cfg.slowdown_factor > 1.0:
        argv += ["--slowdown-after", repr(cfg.slowdown_after), "--slowdown-factor", repr(cfg.slowdown_factor)]
    if cfg.mem_creep_mib_s:
        argv += ["--mem-creep-after", repr(cfg.mem_creep_after), "--mem-creep", repr(cfg.mem_creep_mib_s)]
    for flag, on in (
        ("--batch-slowdown", cfg.batch_slowdown),
        ("--reasoning", cfg.reasoning),
        ("--usage-on-finish", cfg.usage_on_finish),
        ("--no-done", cfg.no_done),
        ("--detail-errors", cfg.detail_errors),
        ("--strict-openai", cfg.strict_openai),
    ):
        if on:
            argv.append(flag)
    return argv


class SimProcess:
    """`with SimProcess(cfg) as p: p.base_url` — a `ddtree-tui sim` child on a free port, healthy on entry."""

    def __init__(
        self, cfg: SimConfig | None = None, ready_timeout: float = 20.0, wait_ready: bool = True
    ) -> None:
        self.cfg = cfg or SimConfig()
        self.port = self.cfg.port or free_port()
        self.ready_timeout = ready_timeout
        self.wait_ready = wait_ready
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            sim_argv(self.cfg, self.port), stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log
        )
        if self.wait_ready:
            self.wait_healthy(self.ready_timeout + self.cfg.load_time)

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"sim exited early: {self.output()[-800:]}")
            try:
                with urllib.request.urlopen(
                    self.base_url + "/health", timeout=1.0 + self.cfg.health_latency
                ) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"sim not healthy after {timeout:g} s: {self.output()[-800:]}")

    def output(self) -> str:
        """Everything the child wrote (banner, log lines) so far."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace`; returns the exit status."""
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        return p.returncode

    def __enter__(self) -> SimProcess:
        try:
            self.start()
        except BaseException:  # never healthy: the child must not outlive the `with`
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()

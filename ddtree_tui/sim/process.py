"""A simulated server in a child process (for tests, benchmarks and the demo), stopped however we leave.

A child process, unlike the in-process SimServer, does not share the event loop or the CPU time of the
client being measured, and can really exit (the `exit` fault).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import IO

from ddtree_tui.config import HostProfile
from ddtree_tui.sim.config import TIME_SCALE_ENV, SimConfig


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """True when `port` cannot be bound on `host` now (another demo, a test run, anything)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def moved_note(ref: str, wanted: int, got: int) -> str:
    """What the demo says when a simulated service of its profile moves off a taken port."""
    return (
        f"demo: port {wanted} of {ref} is in use (another demo or a test run?); using free port {got} instead"
    )


def _ours(workdir: str, svc: str, port: int) -> bool:
    """Whether `port` is held by this very service, left running by an earlier demo in the same workdir (its
    pidfile's process group): then the demo keeps the port and finds the service again."""
    from ddtree_tui.remote.ports import port_holder_pid

    try:
        with open(os.path.join(os.path.expanduser(workdir), "run", svc + ".json"), encoding="utf-8") as f:
            rec = json.load(f)
        _listening, pid = port_holder_pid(port)
        return pid is not None and (pid == rec.get("pid") or os.getpgid(pid) == rec.get("pgid"))
    except (OSError, ValueError, AttributeError):
        return False


def demo_ports(profiles: Sequence[HostProfile]) -> tuple[list[HostProfile], list[str]]:
    """The demo's profiles with every simulated service of a local host whose port is taken moved to a free
    port (the loaded profiles are not changed), and one note per move to show the user. The demo's ports are
    fixed in its profile; two demos, or a demo and a test run, on one machine would otherwise clash."""
    out: list[HostProfile] = []
    notes: list[str] = []
    used: set[int] = set()
    for prof in profiles:
        services = []
        for spec in prof.service:
            port = spec.port
            if (
                prof.is_local
                and spec.launcher == "sim"
                and (port in used or port_taken(port))
                and not _ours(prof.workdir, spec.name, port)
            ):
                new = free_port()
                while new in used:
                    new = free_port()
                notes.append(moved_note(f"{prof.name}/{spec.name}", port, new))
                spec = spec.model_copy(update={"port": new})
            used.add(spec.port)
            services.append(spec)
        out.append(prof.model_copy(update={"service": services}))
    return out, notes


def argword(v: float) -> str:
    """A number as a command-line word without noise: 2.0 -> "2", 0.75 -> "0.75"."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def sim_argv(
    cfg: SimConfig,
    port: int,
    *,
    python: str = sys.executable,
    realistic: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """argv of a `ddtree-tui sim` server: the one builder for tests, the demo and a profile's sim service
    (services/launchline.py). The rates, load time and seed are always stated; everything else only where it
    differs from the simulator's default, so a launch line reads short. `realistic`: the `--realistic` switch
    (SGLang 0.5.23's latencies) instead of its values one by one; `extra`: a profile's extra_args, last."""
    d = _DEFAULT
    a = [python, "-m", "ddtree_tui.cli", "sim", "--algorithm", cfg.algorithm]
    if cfg.mode:
        a += ["--mode", cfg.mode]
    a += ["--port", str(port), "--host", cfg.host]
    if cfg.accept_length is not None:
        a += ["--accept-length", argword(cfg.accept_length)]
    a += ["--decode-rate", argword(cfg.decode_rate), "--load-time", argword(cfg.load_time)]
    a += ["--seed", str(cfg.seed)]
    if realistic:
        a.append("--realistic")
    if cfg.block_size != d.block_size:
        a += ["--block-size", str(cfg.block_size)]
    if cfg.budget is not None:
        a += ["--budget", str(cfg.budget)]
    if cfg.draft_window is not None:
        a += ["--draft-window", str(cfg.draft_window)]
    a += [
        flag
        for flag, on in (("--hybrid", cfg.hybrid), ("--allow-hybrid-unsafe", cfg.allow_hybrid_unsafe))
        if on
    ]
    if cfg.max_running_requests:
        a += ["--max-running-requests", str(cfg.max_running_requests)]
    if cfg.disconnect_abort_s:
        a += ["--disconnect-abort", f"{cfg.disconnect_abort_s:g}"]
    if cfg.model_path != d.model_path:
        a += ["--model-path", cfg.model_path]
    if cfg.decode_log_interval != d.decode_log_interval:
        a += ["--decode-log-interval", str(cfg.decode_log_interval)]
    if cfg.incremental_streaming_output:
        a.append("--incremental-streaming-output")
    for f in cfg.faults:
        a += ["--fault", f]
    # the real server's behaviours (SimConfig's selectable ones)
    if cfg.health_latency:
        a += ["--health-latency", argword(cfg.health_latency)]
    if cfg.prefill_rate:
        a += ["--prefill-rate", argword(cfg.prefill_rate)]
    if cfg.kv_capacity:
        a += ["--kv-capacity", str(cfg.kv_capacity)]
    if cfg.slowdown_factor > 1.0:
        a += [
            "--slowdown-after",
            argword(cfg.slowdown_after),
            "--slowdown-factor",
            argword(cfg.slowdown_factor),
        ]
    if cfg.mem_creep_mib_s:
        a += ["--mem-creep-after", argword(cfg.mem_creep_after), "--mem-creep", argword(cfg.mem_creep_mib_s)]
    for flag, on in (
        ("--batch-slowdown", cfg.batch_slowdown),
        ("--reasoning", cfg.reasoning),
        ("--usage-on-finish", cfg.usage_on_finish),
        ("--no-done", cfg.no_done),
        ("--detail-errors", cfg.detail_errors),
        ("--strict-openai", cfg.strict_openai),
    ):
        if on:
            a.append(flag)
    return a + list(extra)


_DEFAULT = SimConfig()


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
        env = {**os.environ, TIME_SCALE_ENV: argword(self.cfg.time_scale)}  # the CLI takes it from there
        self.proc = subprocess.Popen(
            sim_argv(self.cfg, self.port),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=env,
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

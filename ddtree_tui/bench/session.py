"""The services a headless benchmark measures, as targets: demo children started here (and stopped however
the run ends), 127.0.0.1 for a local host, a port forwarded over SSH otherwise, or running servers given by
URL. No printing: what a user should hear (a host that dropped, then came back) goes to `note`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit

import httpx

from ddtree_tui.bench.client import server_info
from ddtree_tui.bench.models import BenchTarget
from ddtree_tui.bench.runner import Gate, RunHooks
from ddtree_tui.bench.soak import GpuProbe, host_gpu_probe, sim_gpu_probe
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.config import HostProfile, ServiceSpec, find_service
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.services.launchline import sim_argv as launch_sim_argv
from ddtree_tui.sim.process import free_port, moved_note
from ddtree_tui.transport import make_transport
from ddtree_tui.transport.base import TransportError


def target_mode(spec: ServiceSpec) -> str | None:
    """linear (DFlash), shadow-linear / tree (DDTree), None (baseline): shown on every result."""
    if spec.algorithm == "ddtree":
        return spec.mode
    if spec.algorithm == "dflash":
        return "linear"
    return None


def select_services(
    profiles: Sequence[HostProfile], services: str | None
) -> list[tuple[HostProfile, ServiceSpec]]:
    """`--services HOST/SVC,...` or every service of every profile; ValueError names what is unknown."""
    if services:
        refs = [s.strip() for s in services.split(",") if s.strip()]
        if not refs:
            raise ValueError("--services is empty")
        return [find_service(profiles, r) for r in refs]
    out = [(h, s) for h in profiles for s in h.service]
    if not out:
        raise ValueError("no services in the host profiles (add [[service]] tables or use --demo)")
    return out


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class SimChild:
    ref: str
    port: int
    proc: subprocess.Popen[bytes]
    log: IO[bytes]

    def tail(self, n: int = 600) -> str:
        with contextlib.suppress(OSError, ValueError):
            self.log.seek(0)
            return self.log.read().decode("utf-8", "replace")[-n:]
        return ""


@dataclass
class Session:
    """Everything started for a run, so it can all be stopped however the run ends."""

    sims: list[SimChild] = field(default_factory=list)
    transports: list[Any] = field(default_factory=list)
    gates: dict[str, Gate] = field(default_factory=dict)  # by ref: services behind an SSH forward
    where: dict[str, str] = field(default_factory=dict)  # by ref: the route, for connection errors

    def hooks(self, on_event: Callable[[Any], None], stop: asyncio.Event) -> RunHooks:
        """A shape run's hooks through this session's gates and routes."""
        return RunHooks(on_event=on_event, gates=self.gates, where=self.where, stop=stop)

    def stop_sims(self, grace: float = 5.0) -> None:
        for c in self.sims:
            if c.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    c.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for c in self.sims:
            try:
                c.proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    c.proc.kill()
                c.proc.wait(timeout=5)
            c.log.close()
        self.sims.clear()

    async def close_transports(self) -> None:
        for t in self.transports:
            with contextlib.suppress(Exception):
                await t.close()
        self.transports.clear()


def start_sim(sess: Session, ref: str, host: HostProfile, spec: ServiceSpec) -> SimChild:
    port = spec.port if port_free(spec.port) else free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(sim_argv(host, spec, port), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    child = SimChild(ref, port, proc, log)
    sess.sims.append(child)
    return child


async def wait_healthy(child: SimChild, timeout: float) -> None:
    """Poll /health until 200; RuntimeError when the child dies or the time is up."""
    url = f"http://127.0.0.1:{child.port}/health"
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(trust_env=False, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if child.proc.poll() is not None:
                raise RuntimeError(f"simulated {child.ref} exited ({child.proc.returncode}): {child.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"simulated {child.ref} not healthy after {timeout:g} s")


def sim_argv(host: HostProfile, spec: ServiceSpec, port: int) -> list[str]:
    """The command of a demo child: the launcher's own (services/commands.py), on the port it got."""
    return launch_sim_argv(host, spec.model_copy(update={"port": port}))


def _manifest(host: HostProfile, spec: ServiceSpec) -> dict[str, Any]:
    """What the report's manifest shows of a service: its launch argv (as the profile builds it), GPUs and
    the host's telemetry source (replay: the GPU numbers are a recording)."""
    try:
        argv: list[str] | None = build_launch(host, spec).argv
    except Exception:  # a manifest must never stop a benchmark
        argv = None
    return {"argv": argv, "gpus": list(spec.gpus) or None, "telemetry": host.telemetry.source}


def _reconnect_gate(t: Any, host: HostProfile, note: Callable[[str], None]) -> Gate:
    """Hold a request while the host's SSH connection is down, up to a bound: a short drop costs a wait, not
    the run's plan (the forward's local port survives the reconnect)."""
    bound = max(30.0, 3 * host.connect_timeout)

    async def gate() -> str | None:
        if t.status.state == "connected":
            return None
        note(
            f"host {host.name} disconnected ({t.status.error or 'connection lost'}): "
            f"waiting up to {bound:.0f} s for the reconnect"
        )
        if await t.wait_connected(bound):
            note(f"host {host.name} reconnected; going on")
            return None
        return f"host {host.name} still unreachable after {bound:.0f} s"

    return gate


async def make_targets(
    sess: Session,
    chosen: list[tuple[HostProfile, ServiceSpec]],
    demo: bool,
    connect_timeout: float | None = None,
    note: Callable[[str], None] = lambda _msg: None,
) -> list[BenchTarget]:
    """A base URL for each service: a demo child, 127.0.0.1 for a local host, a forwarded port otherwise.

    A remote host gets `connect_timeout` seconds to connect, by default its profile's connect_timeout plus a
    little for the retry after a refused connection: an unreachable host fails the run in bounded time."""
    targets: list[BenchTarget] = []
    transports: dict[str, Any] = {}
    for host, spec in chosen:
        ref = f"{host.name}/{spec.name}"
        mode = target_mode(spec)
        manifest = _manifest(host, spec)
        model: dict[str, Any] = {"model": spec.served_model_name}
        if demo and host.is_local and spec.launcher == "sim":
            child = start_sim(sess, ref, host, spec)
            if child.port != spec.port:  # the demo's fixed port is taken (another demo, a test run)
                note(moved_note(ref, spec.port, child.port))
            manifest["argv"] = sim_argv(host, spec, child.port)
            port, model = child.port, {}
        elif host.is_local:
            port = spec.port
        else:
            t = transports.get(host.name)
            if t is None:
                t = make_transport(host)
                sess.transports.append(t)
                transports[host.name] = t
                await t.start()
                wait = connect_timeout if connect_timeout is not None else host.connect_timeout + 2.0
                if not await t.wait_connected(wait):
                    raise RuntimeError(f"cannot reach host {host.name}: {t.status.error or 'timed out'}")
            try:
                port = await t.forward_port(spec.port)
            except TransportError as e:
                raise RuntimeError(f"cannot forward port {spec.port} of host {host.name}: {e}") from None
            sess.where[ref] = f"http://127.0.0.1:{port} forwarded to port {spec.port} on {host.name} over ssh"
            sess.gates[ref] = _reconnect_gate(t, host, note)
        targets.append(
            BenchTarget(
                ref=ref,
                base_url=f"http://127.0.0.1:{port}",
                algorithm=spec.algorithm,
                mode=mode,
                **manifest,
                **model,
            )
        )
    for child in sess.sims:
        spec = next(s for h, s in chosen if f"{h.name}/{s.name}" == child.ref)
        await wait_healthy(child, spec.sim.load_time + 30.0)
    return targets


def url_list(text: str) -> list[str]:
    """`--url A[,B...]`: each an http(s) base URL; ValueError names the one that is not."""
    out = []
    for u in (x.strip().rstrip("/") for x in text.split(",")):
        if not u:
            continue
        p = urlsplit(u)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise ValueError(f"--url {u!r}: expected http://HOST:PORT (e.g. http://127.0.0.1:30000)")
        if p.path not in ("", "/"):
            raise ValueError(f"--url {u!r}: give the server's base URL, without a path")
        out.append(u)
    if not out:
        raise ValueError("--url is empty")
    if len(set(out)) != len(out):
        raise ValueError(f"a URL is listed twice: {', '.join(out)}")
    return out


def url_ref(url: str) -> str:
    """The name a --url target has in the results: host:port."""
    p = urlsplit(url)
    return p.netloc


_ALGOS = {"DFLASH": "dflash", "DDTREE": "ddtree"}


async def url_targets(urls: list[str], timeout: float = 5.0) -> list[BenchTarget]:
    """A target for each running server given by URL: what it runs comes from its /server_info (SGLang),
    else it is measured as a plain server ("baseline"). Never through a proxy: these are our own ports."""
    out: list[BenchTarget] = []
    async with StreamClient(connect_timeout=timeout) as client:
        for u in urls:
            info = await server_info(client, u, timeout) or {}
            spec = info.get("speculative_algorithm")
            algo = _ALGOS.get(str(spec).upper(), str(spec).lower()) if spec else "baseline"
            mode = "linear" if algo == "dflash" else None
            if algo == "ddtree":
                mode = "shadow-linear" if info.get("speculative_ddtree_shadow_linear") else "tree"
            out.append(BenchTarget(ref=url_ref(u), base_url=u, algorithm=algo, mode=mode))
    return out


async def soak_probes(
    sess: Session, targets: list[BenchTarget], chosen: list[tuple[HostProfile, ServiceSpec]]
) -> dict[str, GpuProbe]:
    """Each service's GPUs: the simulator's modelled GPU for a demo child, else its host's telemetry."""
    out: dict[str, GpuProbe] = {}
    spec_of = {f"{h.name}/{s.name}": (h, s) for h, s in chosen}
    sims = {c.ref for c in sess.sims}
    for t in targets:
        if t.ref in sims or t.ref not in spec_of:
            out[t.ref] = sim_gpu_probe
            continue
        host, spec = spec_of[t.ref]
        tr = make_transport(host)
        sess.transports.append(tr)
        with contextlib.suppress(Exception):
            await tr.start()
        out[t.ref] = host_gpu_probe(tr, host, list(spec.gpus) or None)
    return out

"""The reference deployment as a reusable world: two hosts (CT129, CT200) behind two real sshd processes, each
with a fake environment, and the story's steps as small functions.

Used by tests/scenario/test_reference_story.py, the Pilot variant and benchmarks/scenario.py, so the test and
the benchmark play exactly the same path.

The fake environment of a host lives in its sshd's bin dir (first on the remote PATH) and in its profile:
- nvidia-smi: the telemetry tests' fake (real H200 fixture rows, failure texts switched by a control file
  `nvidia-smi.json`), plus the real default table (driver CUDA 13.0) when called without arguments, which is
  what the doctor reads the driver's CUDA version from;
- the host Python is this venv's real Python (so `launcher = "sim"` services run the real simulator) with the
  doctor tests' fake torch / sglang / sgl_kernel modules on PYTHONPATH, given through the profile's [env]:
  torch reports cu130 on CT129 and cu128 on CT200, and CT200's torch also maps a libcudart.so.12 while
  LD_LIBRARY_PATH points at site-packages/nvidia/cu13/lib: two CUDA runtimes in one process.

Both hosts run on this machine, so they share the port space: every service gets its own free high port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ddtree_tui.config import HostProfile, load_profiles
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.snapshot import FleetSnapshot, ServiceStatus
from tests import httpc
from tests.integration.test_doctor_local import FakeHost
from tests.procs import alive, leftovers
from tests.sshd import SshdServer, SshEnv
from tests.util import free_ports, until

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SIM_OPTS = {"load_time": 0.3, "decode_rate": 3000.0}  # ready in ~0.3 s, thousands of tokens a second
PROBE_INTERVAL = 0.2
TELEMETRY_MS = 200
HANDLE_FAULT = "Unable to determine the device handle for GPU0000:00:07.0: Unknown Error"

SMI_WRAPPER = """#!/bin/sh
# the default table (with the driver's CUDA version) without arguments, else the fixture-replaying fake
here="$(dirname "$0")"
[ $# -eq 0 ] && exec cat "$here/smi-table.txt"
exec {python} "$here/fake_nvidia_smi.py" "$@"
"""


@dataclass
class HostEnv:
    """One fake host: its sshd, its fake tools and modules, its profile file."""

    name: str
    srv: SshdServer
    fake: FakeHost
    profile_path: Path
    workdir: Path

    def set_smi(self, mode: str) -> None:
        """Switch this host's nvidia-smi: "load" (healthy), "handle" (GPU 1's handle error), "nodevices"..."""
        cfg = self.srv.bin_dir / "nvidia-smi.json"
        tmp = cfg.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fixtures": str(FIX / "gpu"), "mode": mode}))
        os.replace(tmp, cfg)


@dataclass
class World:
    """Two hosts, their profiles, the todo file and the bench history of one scenario run."""

    root: Path
    ssh_env: SshEnv
    hosts: dict[str, HostEnv] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    todos_path: Path = Path()
    history_path: Path = Path()

    def profiles(self) -> list[HostProfile]:
        return load_profiles([h.profile_path for h in self.hosts.values()])

    def fleet(self, **kw: Any) -> Fleet:
        return Fleet(
            self.profiles(),
            todos_path=self.todos_path,
            history_path=self.history_path,
            probe_interval=PROBE_INTERVAL,
            **kw,
        )


def _install_smi(srv: SshdServer) -> None:
    bin_dir = srv.bin_dir
    (bin_dir / "fake_nvidia_smi.py").write_text((FIX / "telemetry" / "fake_nvidia_smi.py").read_text())
    (bin_dir / "smi-table.txt").write_text((FIX / "gpu" / "nvidia-smi.txt").read_text())
    exe = bin_dir / "nvidia-smi"
    exe.write_text(SMI_WRAPPER.format(python=sys.executable))
    exe.chmod(0o755)


def _fake_lib(path: Path) -> str:
    """A file named like a CUDA runtime, with bytes so the fake torch can map it (what the doctor sees)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * 4096)
    return str(path)


def _toml_str(v: str) -> str:
    return json.dumps(v)  # a JSON string is a valid TOML basic string


def _service_toml(name: str, algorithm: str, port: int, mode: str | None = None) -> str:
    lines = [
        "[[service]]",
        f"name = {_toml_str(name)}",
        f"algorithm = {_toml_str(algorithm)}",
        'launcher = "sim"',
        f"port = {port}",
        "gpus = [1]",
        "startup_timeout = 30",
        "kill_timeout = 5",
    ]
    if mode:
        lines += [f"mode = {_toml_str(mode)}", "budget = 32"]
    lines += ["[service.sim]"] + [f"{k} = {v}" for k, v in SIM_OPTS.items()]
    return "\n".join(lines) + "\n"


def _host_env(world: World, name: str, cuda: str, services: str) -> HostEnv:
    srv = world.ssh_env.add_server(name)
    fake = FakeHost(world.root / f"env-{name}", bin_dir=srv.bin_dir)
    _install_smi(srv)
    site = fake.root / "venv" / "lib" / "python3.12" / "site-packages"
    env: dict[str, str] = {"PYTHONPATH": str(fake.py)}
    if cuda == "12.8":
        cu13 = _fake_lib(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
        cu12 = _fake_lib(site / "torch" / "lib" / "libcudart.so.12")
        env |= {
            "FAKE_TORCH_VERSION": "2.8.0+cu128",
            "FAKE_TORCH_CUDA": "12.8",
            "LD_LIBRARY_PATH": str(Path(cu13).parent),
            "FAKE_LOAD_LIBS": f"{cu12}:{cu13}",
        }
    else:
        cu13 = _fake_lib(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
        env |= {
            "FAKE_TORCH_VERSION": "2.9.0+cu130",
            "FAKE_TORCH_CUDA": "13.0",
            "LD_LIBRARY_PATH": str(Path(cu13).parent),
            "FAKE_LOAD_LIBS": cu13,
        }
    workdir = world.root / f"work-{name}"
    text = (
        f"name = {_toml_str(name)}\n"
        f"address = {_toml_str(name)}\n"
        f"python = {_toml_str(sys.executable)}\n"
        f"workdir = {_toml_str(str(workdir))}\n"
        "connect_timeout = 10\n"
        "[env]\n"
        + "".join(f"{k} = {_toml_str(v)}\n" for k, v in env.items())
        + f'[telemetry]\nsource = "nvidia-smi"\ninterval_ms = {TELEMETRY_MS}\n\n'
        + services
    )
    path = world.root / "hostprofiles" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    h = HostEnv(name=name, srv=srv, fake=fake, profile_path=path, workdir=workdir)
    h.set_smi("load")
    return h


TODOS = [
    {
        "content": "DFlash up on CT200 GPU 1",
        "status": "pending",
        "priority": "high",
        "check": "service ct200/dflash ready",
        "auto_complete": True,
    },
    {
        "content": "seed3 benchmark of DDTree shadow-linear vs DFlash",
        "status": "pending",
        "priority": "high",
        "check": "bench ct200/ddtree-shadow seed3 ok",
        "auto_complete": True,
    },
    {  # the original's lie: finished, still "in progress"; left to the person, so it is flagged
        "content": "DDTree shadow-linear up on CT200 GPU 1",
        "status": "in_progress",
        "priority": "medium",
        "check": "service ct200/ddtree-shadow ready",
    },
]


def build_world(root: Path, ssh_env: SshEnv) -> World:
    """Two sshd hosts with fake environments, their profiles on disk, a todo file; nothing launched."""
    world = World(root=root, ssh_env=ssh_env)
    p = free_ports(3)
    world.ports = {"ct200/dflash": p[0], "ct200/ddtree-shadow": p[1], "ct129/dflash-prod": p[2]}
    world.hosts["ct129"] = _host_env(
        world, "ct129", "13.0", _service_toml("dflash-prod", "dflash", world.ports["ct129/dflash-prod"])
    )
    world.hosts["ct200"] = _host_env(
        world,
        "ct200",
        "12.8",
        _service_toml("dflash", "dflash", world.ports["ct200/dflash"])
        + "\n"
        + _service_toml("ddtree-shadow", "ddtree", world.ports["ct200/ddtree-shadow"], mode="shadow-linear"),
    )
    world.todos_path = root / "todos.json"
    world.todos_path.write_text(json.dumps({"todos": TODOS}, indent=2))
    world.history_path = root / "bench-history.jsonl"
    return world


# --- waiting -------------------------------------------------------------------------------------------


def service(snap: FleetSnapshot, ref: str) -> ServiceStatus | None:
    host, name = ref.split("/", 1)
    return snap.service(host, name)


async def wait_state(fleet: Fleet, ref: str, states: set[str], timeout: float = 30) -> ServiceStatus:
    def cond() -> ServiceStatus | None:
        s = service(fleet.snapshot(), ref)
        return s if s is not None and s.state in states else None

    def detail() -> str:
        s = service(fleet.snapshot(), ref)
        return f"{ref} is {s.state if s else 'absent'} ({s.detail if s else ''})"

    return await until(cond, timeout, f"{ref} {'/'.join(sorted(states))}", detail=detail)


# --- steps ---------------------------------------------------------------------------------------------


def suggested_port(suggestion: str | None) -> int:
    """The port in a refusal's suggestion ("set port = 30011 for dflash in ...")."""
    m = re.search(r"port = (\d+)", suggestion or "")
    if m is None:
        raise AssertionError(f"no port suggested in {suggestion!r}")
    return int(m.group(1))


def set_profile_port(path: Path, old: int, new: int) -> None:
    """What the person does with the suggestion: edit the port in the profile (atomically)."""
    text = path.read_text()
    pat = re.compile(rf"^port = {old}$", re.MULTILINE)
    assert len(pat.findall(text)) == 1, f"port {old} not found once in {path}"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(pat.sub(f"port = {new}", text))
    os.replace(tmp, path)


@contextlib.contextmanager
def hold_port(port: int) -> Iterator[socket.socket]:
    """Someone else's listener on a port (an old server nobody stopped)."""
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    try:
        yield s
    finally:
        s.close()


async def smoke(fleet: Fleet, ref: str, max_new_tokens: int = 16) -> dict[str, Any]:
    """One /generate through the fleet's port forward, the way the engineer's curl smoke test did."""
    (target,) = await fleet.bench_targets([ref])
    r = await httpc.apost(
        f"{target.base_url}/generate",
        json={"text": "Write a fibonacci function.", "sampling_params": {"max_new_tokens": max_new_tokens}},
        timeout=20,
    )
    r.raise_for_status()
    return r.json()


def crash(pid: int) -> None:
    """The crash that took CT129's GPU with it: the service process dies by SIGKILL (a process we launched)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def sim_processes(ports: set[int]) -> list[psutil.Process]:
    """Simulator processes serving one of our ports (ours: the ports were chosen free for this run)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if "ddtree_tui.cli" in cmd and "sim" in cmd and "--port" in cmd:
            i = cmd.index("--port")
            if i + 1 < len(cmd) and cmd[i + 1].isdigit() and int(cmd[i + 1]) in ports:
                out.append(p)
    return out


def kill_strays(world: World) -> None:
    """Last-resort cleanup after a failed run: end the simulators of this run's ports, by pid."""
    for p in sim_processes(set(world.ports.values())):
        with contextlib.suppress(psutil.Error):
            p.kill()


async def all_gone(world: World, timeout: float = 10) -> tuple[list[str], list[str]]:
    """Wait until no simulator of ours and no helper mentioning our dir remains; what is left after the wait."""
    ports = set(world.ports.values())
    deadline = time.monotonic() + timeout
    while True:
        sims = [
            f"{p.pid}: {' '.join(p.info['cmdline'] or [])[:150]}" for p in sim_processes(ports) if alive(p)
        ]
        left = leftovers(world.root)
        if (not sims and not left) or time.monotonic() > deadline:
            return sims, left
        await asyncio.sleep(0.1)


class Timer:
    """Step timings for the benchmark table (the test uses it too; it costs nothing)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []
        self._t0 = time.monotonic()

    @contextlib.asynccontextmanager
    async def step(self, name: str) -> Any:
        t = time.monotonic()
        try:
            yield
        finally:
            self.steps.append((name, time.monotonic() - t))

    async def run(self, name: str, aw: Awaitable[Any]) -> Any:
        async with self.step(name):
            return await aw

    @property
    def total(self) -> float:
        return time.monotonic() - self._t0


# --- the story -----------------------------------------------------------------------------------------


@dataclass
class StoryResult:
    """What the story observed, for the test's asserts and the benchmark's table."""

    doctor_ct200: Any = None
    doctor_ct129: Any = None
    refused: Any = None
    new_port: int = 0
    launches: dict[str, Any] = field(default_factory=dict)
    smokes: dict[str, dict[str, Any]] = field(default_factory=dict)
    bench: Any = None
    bench_table: str = ""
    todo_status: list[str] = field(default_factory=list)
    todo_evidence: list[Any] = field(default_factory=list)
    todos_on_disk: list[dict[str, Any]] = field(default_factory=list)
    fault_gpu: Any = None
    crashed: Any = None
    move: Any = None
    moved: Any = None
    kills: dict[str, Any] = field(default_factory=dict)
    leftover_sims: list[str] = field(default_factory=list)
    leftover_procs: list[str] = field(default_factory=list)


async def play_story(world: World, timer: Timer) -> StoryResult:
    """The reference deployment, start to end, through the real core (Fleet over ssh to both hosts).

    Asserts only what the story cannot go on without; the test asserts the rest on the result.
    """
    from ddtree_tui.doctor import run_doctor

    res = StoryResult()
    ct200 = world.hosts["ct200"]
    fleet = world.fleet()
    try:
        await timer.run("fleet start + first samples", _start(fleet))
        # before the story: CT129 serves the team's DFlash
        async with timer.step("ct129/dflash-prod up (before the story)"):
            r = await fleet.launch("ct129/dflash-prod")
            assert r.ok, r
            await wait_state(fleet, "ct129/dflash-prod", {"ready"})
        # the new host: the doctor finds the CUDA-build mismatch before anything is launched
        async with timer.step("doctor ct200 + ct129"):
            profs = {p.name: p for p in fleet.profiles()}
            res.doctor_ct200, res.doctor_ct129 = await asyncio.gather(
                run_doctor(fleet.transport("ct200"), profs["ct200"]),
                run_doctor(fleet.transport("ct129"), profs["ct129"]),
            )
        # the port DFlash wants on CT200 is held: refused with the next free one; the profile is edited
        old = world.ports["ct200/dflash"]
        async with timer.step("port refused, profile edited"):
            with hold_port(old):
                res.refused = await fleet.launch("ct200/dflash")
            assert not res.refused.ok, res.refused
            res.new_port = suggested_port(res.refused.suggestion)
            set_profile_port(ct200.profile_path, old, res.new_port)
            world.ports["ct200/dflash"] = res.new_port
            world.ports["held"] = old
        # the edited profile is read again (the TUI restarts the same way); CT129's service keeps running
        async with timer.step("reload profiles (fleet restart)"):
            await fleet.stop()
            fleet = world.fleet()
            await _start(fleet)
            await wait_state(fleet, "ct129/dflash-prod", {"ready"})
        async with timer.step("launch dflash + ddtree-shadow, both ready"):
            refs = ["ct200/dflash", "ct200/ddtree-shadow"]
            launched = await asyncio.gather(*(fleet.launch(r) for r in refs))
            res.launches = dict(zip(refs, launched, strict=True))
            for r in launched:
                assert r.ok, r
            await asyncio.gather(*(wait_state(fleet, r, {"ready"}) for r in refs))
        async with timer.step("smoke generation x2"):
            out = await asyncio.gather(*(smoke(fleet, r) for r in refs))
            res.smokes = dict(zip(refs, out, strict=True))
        async with timer.step("seed3 bench, interleaved"):
            from ddtree_tui.bench.models import BenchRequest
            from ddtree_tui.bench.report import table

            req = BenchRequest(
                refs=refs, prompts="seed3", repeats=1, max_new_tokens=32, baseline="ct200/dflash", warmup=0
            )
            res.bench = await fleet.run_bench(req)
            res.bench_table = table(res.bench)
        async with timer.step("todos verify themselves"):

            def settled() -> bool:
                ev = fleet.todo_evidence()
                st = [it.status for it in fleet.todos.items]
                # every check judged (the evidence is re-judged on the next todo pass after the completion;
                # sampled between the two, one can still read "unknown"): the assertions below are unchanged
                judged = all(e.state == "verified" for e in ev)
                return (
                    len(ev) == 3 and st[:2] == ["completed", "completed"] and bool(ev[2].mismatch) and judged
                )

            await until(
                settled, 15, "todo evidence", detail=lambda: (fleet.todo_evidence(), fleet.todos.items)
            )
            res.todo_status = [it.status for it in fleet.todos.items]
            res.todo_evidence = fleet.todo_evidence()
            res.todos_on_disk = json.loads(world.todos_path.read_text())["todos"]
        # mid-run, CT129 crashes and loses GPU 1: nvidia-smi answers with the driver's error for it
        async with timer.step("ct129 GPU fault + crash seen"):
            pid = service(fleet.snapshot(), "ct129/dflash-prod").pid  # type: ignore[union-attr]
            world.hosts["ct129"].set_smi("handle")
            crash(pid)

            def faulted() -> Any:
                h = fleet.snapshot().host("ct129")
                g = next((g for g in h.gpus if g.index == 1), None) if h else None
                return g if g is not None and g.health == "fault" else None

            res.fault_gpu = await until(faulted, 15, "ct129 GPU 1 fault")
            res.crashed = await wait_state(fleet, "ct129/dflash-prod", {"crashed"})
        async with timer.step("move ct129/dflash-prod -> ct200"):
            res.move = await fleet.move("ct129/dflash-prod", "ct200")
            res.moved = service(fleet.snapshot(), "ct200/dflash-prod")
        async with timer.step("kill everything"):
            for ref in ("ct200/dflash", "ct200/ddtree-shadow", "ct200/dflash-prod", "ct129/dflash-prod"):
                res.kills[ref] = await fleet.kill(ref)
    finally:
        async with timer.step("fleet stop"):
            await fleet.stop()
    async with timer.step("no process left"):
        res.leftover_sims, res.leftover_procs = await all_gone(world)
    return res


async def _start(fleet: Fleet) -> None:
    await fleet.start()
    await fleet.wait_settled(30)
    await until(
        lambda: all(h.state == "connected" and h.gpus for h in fleet.snapshot().hosts),
        30,
        "both hosts connected with GPU samples",
        detail=lambda: [(h.name, h.state, h.error, len(h.gpus)) for h in fleet.snapshot().hosts],
    )

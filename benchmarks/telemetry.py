"""Telemetry cost, host side and client side; prints tables.

(a) Host side, per tick: the sampler program (NVML kept open, /proc reads) against spawning nvidia-smi each
    tick. Without a GPU here, NVML is the fake pynvml of the tests and nvidia-smi the fake script printing the
    real H200 rows (a Python start: cheaper than the real binary, which the fixture README measured at 42 ms per
    call on an H200 against 0.03 ms for an NVML sweep).
(b) Client side: N simulated hosts × G GPUs at 1 Hz through real sshd processes (one sshd per host, the
    sampler program with the fake NVML on each): CPU seconds of this process and peak RSS.
    Target: < 5 % of one core and < 150 MB.

    .venv/bin/python benchmarks/telemetry.py [--seconds 60] [--hosts 16] [--gpus 8] [--skip-client]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddtree_tui.config import parse_profile  # noqa: E402
from ddtree_tui.telemetry import HostTelemetry  # noqa: E402
from ddtree_tui.telemetry.sampler import SAMPLER_PROGRAM  # noqa: E402
from ddtree_tui.transport import make_transport  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
FAKE_NVML = FIX / "telemetry" / "fake_nvml"


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |")


def fake_smi_dir(tmp: Path, ngpus: int) -> Path:
    d = tmp / "bin"
    d.mkdir(parents=True, exist_ok=True)
    smi = d / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\n" + (FIX / "telemetry" / "fake_nvidia_smi.py").read_text())
    smi.chmod(0o755)
    (d / "nvidia-smi.json").write_text(
        json.dumps({"fixtures": str(FIX / "gpu"), "mode": "load", "ngpus": ngpus})
    )
    return d


def program_cpu_per_tick(
    env: dict[str, str], mode: str, interval_ms: int, seconds: float
) -> tuple[float, int]:
    """Run the sampler program for `seconds`; (CPU ms of it and its children per tick, ticks)."""
    argv = [sys.executable, "-u", "-c", SAMPLER_PROGRAM, "--interval-ms", str(interval_ms), "--mode", mode]
    t0 = os.times()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    # skip start-up (interpreter, NVML init, first nvidia-smi) by counting CPU from the 3rd line on
    assert p.stdout is not None
    for _ in range(3):
        p.stdout.readline()
    start_cpu = None
    import psutil

    proc = psutil.Process(p.pid)

    def cpu() -> float:
        total = sum(proc.cpu_times()[:2])
        for c in proc.children(recursive=True):
            try:
                total += sum(c.cpu_times()[:2])
            except psutil.Error:
                pass
        return total

    start_cpu = cpu()
    ticks = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        ticks += 1
    used = cpu() - start_cpu
    p.kill()
    p.wait()
    del t0
    return (1000 * used / ticks if ticks else float("nan")), ticks


def host_side(seconds: float, ngpus: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="telbench-"))
    bin_dir = fake_smi_dir(tmp, ngpus)
    state = tmp / "nvml.json"
    state.write_text(json.dumps({"ngpus": ngpus}))
    base = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    nvml_env = {**base, "PYTHONPATH": str(FAKE_NVML), "FAKE_NVML_STATE": str(state)}
    rows = []
    # in-process tick of the program's sampler (fake NVML) — the work one tick does
    sys.path.insert(0, str(FAKE_NVML))
    os.environ["FAKE_NVML_STATE"] = str(state)
    from ddtree_tui.telemetry import sampler_program as sp

    s = sp.Sampler(sp.parse_args(["--mode", "nvml"]))
    times = []
    for _ in range(300):
        t = time.perf_counter()
        s.tick()
        times.append(time.perf_counter() - t)
    s.close()
    rows.append(
        [
            f"sampler tick in-process (fake NVML, {ngpus} GPUs, /proc host stats)",
            f"{statistics.median(times) * 1000:.3f}",
            "wall, median of 300",
        ]
    )
    cpu_ms, n = program_cpu_per_tick(nvml_env, "nvml", 100, min(seconds, 5))
    rows.append(
        [
            f"sampler program process, NVML mode ({n} ticks at 10 Hz)",
            f"{cpu_ms:.3f}",
            "CPU per tick incl. JSON out",
        ]
    )
    cpu_ms, n = program_cpu_per_tick(base, "nvidia-smi", 200, min(seconds, 5))
    rows.append(
        [
            f"sampler program, nvidia-smi -lms streamed ({n} ticks at 5 Hz)",
            f"{cpu_ms:.3f}",
            "CPU per tick, program + fake smi",
        ]
    )
    spawn = []
    cpu0 = os.times()
    for _ in range(20):
        t = time.perf_counter()
        subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=index,uuid,utilization.gpu,memory.used,power.draw",
                "--format=csv,noheader,nounits",
            ],
            env=base,
            stdout=subprocess.DEVNULL,
            check=True,
        )
        spawn.append(time.perf_counter() - t)
    cpu1 = os.times()
    child_cpu = (cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system) / 20
    rows.append(
        [
            "spawn fake nvidia-smi per tick (a Python start)",
            f"{statistics.median(spawn) * 1000:.1f}",
            f"wall; CPU {child_cpu * 1000:.1f} ms",
        ]
    )
    rows.append(["H200 reference: one real `nvidia-smi --query-gpu`", "42", "fixture README, median"])
    rows.append(
        [
            "H200 reference: NVML sweep of 2 GPUs (nvidia-ml-py)",
            "0.03",
            "fixture README, after nvmlInit (14 ms)",
        ]
    )
    table("(a) host side, cost per tick", ["what", "ms", "note"], rows)


async def client_side(seconds: float, hosts: int, ngpus: int) -> None:
    from tests.sshd import SshEnv

    tmp = Path(tempfile.mkdtemp(prefix="telbench-ssh-"))
    env = SshEnv(tmp)
    os.environ["HOME"] = str(env.home)
    state = tmp / "nvml.json"
    state.write_text(json.dumps({"ngpus": ngpus}))
    print(f"\nstarting {hosts} sshd servers ...", file=sys.stderr)
    transports = []
    tels = []
    counts = {"updates": 0, "gpu_samples": 0}

    def on_update(host, gpus, status) -> None:  # type: ignore[no-untyped-def]
        counts["updates"] += 1
        counts["gpu_samples"] += len(gpus)

    try:
        for i in range(hosts):
            env.add_server(f"h{i:02d}")
        extra = f'python = "{sys.executable}"\nenv = {{ PYTHONPATH = "{FAKE_NVML}", FAKE_NVML_STATE = "{state}" }}\n'
        for i in range(hosts):
            prof = parse_profile(env.profile_toml(f"h{i:02d}", extra=extra))
            t = make_transport(prof)
            await t.start()
            transports.append(t)
        for t in transports:
            assert await t.wait_connected(30), t.status
        tasks = []
        for t in transports:
            tel = HostTelemetry(t, t.profile, on_update=on_update, interval=1.0)
            tels.append(tel)
            tasks.append(asyncio.create_task(tel.run()))
        # warm-up: every host delivering
        deadline = time.monotonic() + 60
        while counts["updates"] < 2 * hosts and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        u0 = dict(counts)
        w0 = time.monotonic()
        await asyncio.sleep(seconds)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - w0
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        ups = counts["updates"] - u0["updates"]
        samples = counts["gpu_samples"] - u0["gpu_samples"]
        faults = sum(1 for tel in tels if tel.last and tel.last[2].fault)
        rows = [
            ["hosts × GPUs, interval", f"{hosts} × {ngpus}, 1 s"],
            ["measured for", f"{wall:.1f} s (after warm-up)"],
            ["updates received / expected", f"{ups} / {int(hosts * wall)}"],
            ["GPU samples received", f"{samples}"],
            ["CPU of this process", f"{cpu:.2f} s = {100 * cpu / wall:.2f} % of one core (target < 5 %)"],
            ["peak RSS of this process", f"{r1.ru_maxrss / 1024:.1f} MB (target < 150 MB)"],
            ["hosts with a fault at the end", str(faults)],
        ]
        table("(b) client side, through real sshd (fake NVML on each host)", ["what", "value"], rows)
    finally:
        for t in transports:
            await t.close()
        env.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--skip-host", action="store_true")
    ap.add_argument("--skip-client", action="store_true")
    a = ap.parse_args()
    if not a.skip_host:
        host_side(a.seconds, a.gpus)
    if not a.skip_client:
        asyncio.run(client_side(a.seconds, a.hosts, a.gpus))


if __name__ == "__main__":
    main()

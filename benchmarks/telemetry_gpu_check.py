"""Check the telemetry on a real NVIDIA GPU machine and save a recording (a new fixture).

    python benchmarks/telemetry_gpu_check.py OUT.jsonl [--seconds 30] [--load] [--python python3]

1. the local NVML sampler (HostTelemetry over LocalTransport, in-process nvidia-ml-py) for a few ticks;
2. the remote sampler program run here as a host would run it (`python3 -u -c <program>`), NVML mode and
   nvidia-smi mode;
3. `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` at the same moment, and a side-by-side table;
4. cost per tick: one NVML sweep vs one nvidia-smi process;
5. the program's JSON lines for --seconds written to OUT.jsonl, led by a {"meta": ...} line — a recording
   `[telemetry] source = "replay"`, `replay = "OUT.jsonl"` plays back.
With --load a second process (torch, bf16 matmul on GPU 0) keeps the GPU busy while this runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddtree_tui.config import parse_profile  # noqa: E402
from ddtree_tui.model.snapshot import GpuSample  # noqa: E402
from ddtree_tui.remote.smi import parse_help_fields, pick_fields  # noqa: E402
from ddtree_tui.telemetry import HostTelemetry  # noqa: E402
from ddtree_tui.telemetry.frames import FrameBuilder  # noqa: E402
from ddtree_tui.telemetry.nvsmi import parse_query  # noqa: E402
from ddtree_tui.telemetry.sampler import SAMPLER_PROGRAM  # noqa: E402
from ddtree_tui.transport.local import LocalTransport  # noqa: E402

LOAD = r"""
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""


def row(tag: str, g: GpuSample) -> str:
    return (
        f"{tag:<14} gpu{g.index} util={g.util_gpu}% mem={g.mem_used_mb}/{g.mem_total_mb} MiB "
        f"temp={g.temp_c}C power={g.power_w}/{g.power_limit_w} W sm={g.sm_clock_mhz} MHz {g.pstate} "
        f"throttle={g.throttle_reasons} procs={[(p.pid, p.name, p.used_memory_mb) for p in g.processes]} "
        f"health={g.health}{' ' + str(g.fault) if g.fault else ''}"
    )


async def local_nvml(ticks: int) -> list[GpuSample]:
    prof = parse_profile('name = "local"\naddress = "local"\nworkdir = "/tmp"\n')
    got: list = []
    tel = HostTelemetry(LocalTransport(prof), prof, on_update=lambda *a: got.append(a), interval=0.5)
    task = asyncio.create_task(tel.run())
    deadline = time.monotonic() + 20
    while len(got) < ticks and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if not got:
        print("local sampler: no update")
        return []
    host, gpus, status = got[-1]
    print(f"\n== 1. local NVML sampler: {status}")
    print(f"host: {host}")
    for g in gpus:
        print(row("local-nvml", g))
    return gpus


def program_lines(python: str, mode: str, count: int, interval_ms: int = 1000) -> list[dict]:
    argv = [python, "-u", "-c", SAMPLER_PROGRAM, "--interval-ms", str(interval_ms), "--mode", mode]
    argv += ["--count", str(count)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60 + count * interval_ms / 1000)
    if p.returncode != 0:
        print(f"program ({mode}) exit {p.returncode}: {p.stderr[-2000:]}")
    return [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]


def smi_now() -> tuple[list[str], str]:
    try:
        help_ = subprocess.run(["nvidia-smi", "--help-query-gpu"], capture_output=True, text=True)
        fields = pick_fields(parse_help_fields(help_.stdout) if help_.returncode == 0 else None)
        q = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
        p = subprocess.run(q, capture_output=True, text=True)
    except FileNotFoundError:
        return pick_fields(None), "nvidia-smi: command not found"
    return fields, p.stdout + p.stderr


def costs() -> None:
    import pynvml as nv

    t = time.perf_counter()
    nv.nvmlInit()
    init_ms = (time.perf_counter() - t) * 1000
    hs = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    sweeps = []
    for _ in range(200):
        t = time.perf_counter()
        for h in hs:
            nv.nvmlDeviceGetUtilizationRates(h)
            nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
            nv.nvmlDeviceGetPowerUsage(h)
            nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        sweeps.append((time.perf_counter() - t) * 1000)
    spawns = []
    for _ in range(10):
        t = time.perf_counter()
        subprocess.run(
            ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,power.draw,temperature.gpu",
             "--format=csv,noheader,nounits"], capture_output=True)  # fmt: skip
        spawns.append((time.perf_counter() - t) * 1000)
    print("\n== 4. cost per tick")
    print(
        f"nvmlInit: {init_ms:.1f} ms; NVML sweep of {len(hs)} GPUs: median {statistics.median(sweeps):.3f} ms"
    )
    print(f"one nvidia-smi --query-gpu process: median {statistics.median(spawns):.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="where to write the JSON-lines recording")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--load", action="store_true", help="run a torch bf16 matmul on GPU 0 meanwhile")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs the sampler program")
    a = ap.parse_args()
    load = None
    if a.load:
        load = subprocess.Popen([sys.executable, "-c", LOAD, str(a.seconds + 60)])
        print(f"load process pid {load.pid} (torch matmul on GPU 0); waiting 8 s for it to ramp up")
        time.sleep(8)
    try:
        local = asyncio.run(local_nvml(4))
        print("\n== 2. sampler program, as a remote host runs it")
        fb = FrameBuilder()
        prog: dict[str, list[GpuSample]] = {}
        for mode in ("nvml", "nvidia-smi"):
            lines = program_lines(a.python, mode, 3)
            if not lines:
                continue
            _, gpus, status = fb.build(lines[-1])
            prog[mode] = gpus
            print(f"program mode={mode}: {status}")
            for g in gpus:
                print(row(f"prog-{mode}", g))
        fields, text = smi_now()
        print("\n== 3. nvidia-smi now:\n" + text.strip())
        smi = parse_query(text, fields).samples
        print("\nside by side (util %, mem used MiB, power W, temp C, SM MHz):")
        for g in smi:
            cols = [("nvidia-smi", g)]
            cols += [(f"local-nvml", x) for x in local if x.index == g.index]  # noqa: F541
            cols += [(f"prog-{m}", x) for m, gs in prog.items() for x in gs if x.index == g.index]
            for tag, x in cols:
                print(f"  gpu{g.index} {tag:<16} {x.util_gpu!s:>4} {x.mem_used_mb!s:>7} {x.power_w!s:>8} "
                      f"{x.temp_c!s:>4} {x.sm_clock_mhz!s:>5}")  # fmt: skip
        try:
            costs()
        except Exception as e:
            print(f"cost measurement skipped: {e}")
        print(f"\n== 5. recording {a.seconds} s of the sampler program (NVML mode) to {a.out}")
        lines = program_lines(a.python, "auto", a.seconds)
        gpu_names = sorted({g.get("name") for ln in lines for g in ln.get("gpus", []) if g.get("name")})
        meta = {
            "meta": {
                "note": f"recording of {' + '.join(gpu_names) or 'GPUs'} on {platform.node()}",
                "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                "driver": next((ln.get("driver") for ln in lines if ln.get("driver")), None),
                "load": "torch bf16 8192x8192 matmul on GPU 0" if a.load else None,
                "ticks": len(lines),
                "interval_ms": 1000,
                "tool": "benchmarks/telemetry_gpu_check.py",
            }
        }
        out = Path(a.out)
        tmp = out.with_suffix(out.suffix + ".tmp")
        with tmp.open("w") as f:
            f.write(json.dumps(meta) + "\n")
            for ln in lines:
                f.write(json.dumps(ln, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
        print(f"wrote {len(lines)} ticks to {out}")
    finally:
        if load is not None:
            load.kill()
            load.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How far is the run's energy (bench/energy.py: trapezoid over power samples) from the GPU's own energy
counter? Issue 26.

    python benchmarks/energy_check.py record OUT.json [--seconds 36]   # on a GPU host (torch + nvidia-ml-py)
    python benchmarks/energy_check.py table OUT.json                   # here: the project's integration

`record` keeps GPU 0 busy in a fixed pattern (idle, full bf16 matmul, idle, half duty in 0.5 s pulses, idle),
reads NVML's board power every 0.1 s with its time, and NVML's total-energy counter (millijoules, the
hardware's own integral) at every sample. It needs nothing of this package (the GPU host has no pydantic):
stdlib, torch and pynvml only. `table` integrates the recorded power with `bench.energy.energy_j` exactly as a
run does, at the recorded 10 Hz and subsampled to 1 Hz and 0.5 Hz (the fleet's default telemetry interval is
1 s), over each phase and the whole, and prints each against the counter as a ratio.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (name, seconds, duty): duty 1 = matmul all the time, 0.5 = 0.5 s on / 0.5 s off, 0 = idle
PHASES = [("idle", 6, 0.0), ("full", 10, 1.0), ("idle2", 5, 0.0), ("half", 10, 0.5), ("idle3", 5, 0.0)]


def record(out: Path, seconds: float) -> None:  # pragma: no cover - needs a GPU
    import pynvml  # type: ignore[import-not-found]
    import torch  # type: ignore[import-not-found]

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(h)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    scale = seconds / sum(p[1] for p in PHASES)
    samples: list[dict[str, float]] = []
    marks: list[dict[str, object]] = []
    stop = threading.Event()

    def sampler() -> None:
        next_at = time.time()
        while not stop.is_set():
            t = time.time()
            samples.append(
                {
                    "ts": t,
                    "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                    "energy_mj": float(pynvml.nvmlDeviceGetTotalEnergyConsumption(h)),
                }
            )
            next_at += 0.1
            time.sleep(max(0.0, next_at - time.time()))

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    for phase, secs, duty in PHASES:
        t0 = time.time()
        end = t0 + secs * scale
        while time.time() < end:
            on = duty >= 1.0 or (duty > 0 and (time.time() - t0) % 1.0 < duty)
            if on:
                for _ in range(4):
                    a @ b
                torch.cuda.synchronize()
            else:
                time.sleep(0.01)
        marks.append({"phase": phase, "start": t0, "end": time.time()})
    stop.set()
    th.join()
    meta = {"gpu": name, "driver": pynvml.nvmlSystemGetDriverVersion(), "torch": torch.__version__}
    out.write_text(json.dumps({"meta": meta, "phases": marks, "samples": samples}))
    print(f"{len(samples)} samples over {samples[-1]['ts'] - samples[0]['ts']:.1f} s written to {out}")


def _counter_j(samples: list[dict[str, float]], t0: float, t1: float) -> float:
    """The hardware counter's joules over [t0, t1], read linearly between the samples around each edge."""

    def at(t: float) -> float:
        for x, y in itertools.pairwise(samples):
            if x["ts"] <= t <= y["ts"]:
                f = (t - x["ts"]) / (y["ts"] - x["ts"]) if y["ts"] > x["ts"] else 0.0
                return x["energy_mj"] + (y["energy_mj"] - x["energy_mj"]) * f
        return samples[0]["energy_mj"] if t < samples[0]["ts"] else samples[-1]["energy_mj"]

    return (at(t1) - at(t0)) / 1000.0


def table(path: Path) -> None:
    from ddtree_tui.bench.energy import Point, coverage, energy_j

    d = json.loads(path.read_text())
    samples = d["samples"]
    pts = [Point(s["ts"], s["power_w"]) for s in samples]
    spans = [(m["phase"], m["start"], m["end"]) for m in d["phases"]]
    spans.append(("whole", d["phases"][0]["start"], d["phases"][-1]["end"]))
    rates = [("10 Hz", 1), ("1 Hz", 10), ("0.5 Hz", 20)]
    head = f"{'phase':<7} {'s':>5} {'counter J':>10} {'mean W':>7}" + "".join(
        f" {r + ' J':>10} {'ratio':>6}" for r, _ in rates
    )
    print(
        f"# {d['meta']['gpu']}, driver {d['meta']['driver']}: trapezoid over NVML power vs the energy counter"
    )
    print(head)
    for name, t0, t1 in spans:
        ref = _counter_j(samples, t0, t1)
        cells = ""
        for _, step in rates:
            sub = pts[::step]
            if (
                coverage(sub, t0, t1) < 0.999
            ):  # a subsample may start after the phase: integrate what it covers
                sub = [p for p in pts if p.ts <= t0][-1:] + sub + [p for p in pts if p.ts >= t1][:1]
            j = energy_j(sub, t0, t1)
            cells += f" {j:>10.1f} {j / ref:>6.3f}"
        print(f"{name:<7} {t1 - t0:>5.1f} {ref:>10.1f} {ref / (t1 - t0):>7.1f}{cells}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["record", "table"])
    ap.add_argument("path", type=Path)
    ap.add_argument("--seconds", type=float, default=36.0)
    a = ap.parse_args()
    if a.mode == "record":
        record(a.path, a.seconds)
    else:
        table(a.path)


if __name__ == "__main__":
    main()

"""Collector cost: one `serve` process core watching N simulated hosts × G GPUs at 1 Hz; prints a table.

--source ssh (default): the hosts are in-process fake transports (no ssh, no subprocess): each streams the
sampler program's JSON line once a second (G GPUs with moving numbers, host stats) and answers the service
watcher, so the collector does the real work of a fleet — frames -> models -> snapshot -> events -> SSE
fan-out -> /metrics — and none of the hosts' work (except making those lines, which is counted against us).
--source prometheus: `[telemetry] source = "prometheus"`; a real Prometheus (the OS package) scrapes a
DCGM-exporter-shaped endpoint (a child process) with N × G GPUs every second, and the collector reads them
through the HTTP API (one shared query a second). /metrics is scraped by `curl` (a child process, so its CPU is not ours) every
--scrape-interval seconds and its latency recorded; --event-clients `curl -N /events` readers stay attached.
CPU is this process's user+system time over the measured window (all its threads), as % of one core.
Goal: < 10 % of one core and < 300 MB RSS with 200 hosts × 8 GPUs.

    .venv/bin/python benchmarks/collector.py [--hosts 200] [--gpus 8] [--seconds 30] [--warmup 10]
                                             [--source ssh|prometheus]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ddtree_tui.fleet as fleet_mod  # noqa: E402
import ddtree_tui.fleet.hosts as hosts_mod  # noqa: E402
from ddtree_tui.collector.server import Collector, serve  # noqa: E402
from ddtree_tui.config import HostProfile, parse_profile  # noqa: E402
from ddtree_tui.model.snapshot import ConnStatus  # noqa: E402
from ddtree_tui.sim.process import free_port  # noqa: E402
from ddtree_tui.transport.base import RunResult, Transport  # noqa: E402


class FakeHost(Transport):
    """A host that is always connected; the sampler stream is synthetic JSON lines at the asked interval."""

    gpus = 8

    async def start(self) -> None:
        self._set_status(ConnStatus(state="connected", since=time.time()))

    async def wait_connected(self, timeout: float | None = None) -> bool:
        return True

    async def close(self) -> None:
        return None

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 30.0,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        return RunResult(
            argv=list(argv), exit_status=0, stdout='{"services": {}}\n', stderr="", duration_s=0.0
        )

    def stream(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        stderr: bool = False,
    ) -> AsyncIterator[str]:
        args = list(argv)
        if "--interval-ms" in args:
            return self._sampler(int(args[args.index("--interval-ms") + 1]) / 1000.0)
        return self._watcher()

    async def _watcher(self) -> AsyncIterator[str]:
        while True:
            yield '{"services": {}}'
            await asyncio.sleep(2.0)

    async def _sampler(self, interval: float) -> AsyncIterator[str]:
        seed = sum(map(ord, self.profile.name))
        await asyncio.sleep((seed % 100) / 100.0 * interval)  # hosts do not tick in lockstep
        t = 0
        while True:
            gpus = []
            for i in range(self.gpus):
                u = int(50 + 45 * math.sin((t + seed + i) / 7.0))
                gpus.append(
                    {
                        "index": i,
                        "uuid": f"GPU-{seed:08x}-{i:04d}",
                        "name": "NVIDIA H200",
                        "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
                        "util_gpu": u,
                        "util_mem": u // 2,
                        "mem_used_mb": 20000 + 100 * u,
                        "mem_total_mb": 143771,
                        "temp_c": 40 + u // 5,
                        "power_w": 100.0 + 6 * u,
                        "power_limit_w": 700.0,
                        "sm_clock_mhz": 1980,
                        "pstate": "P0",
                        "processes": [],
                    }
                )
            host = {"cpu_percent": 12.5, "load1": 3.2, "mem_used_mb": 200000, "mem_total_mb": 2000000}
            yield json.dumps({"v": 1, "src": "nvml", "driver": "550.54.15", "host": host, "gpus": gpus})
            t += 1
            await asyncio.sleep(interval)

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        raise RuntimeError("the fake host forwards nothing")


def profiles(n: int, prom_url: str | None = None) -> list[HostProfile]:
    tel = f'source = "prometheus"\nprometheus_url = "{prom_url}"\n' if prom_url else ""
    return [
        parse_profile(
            f'name = "gpu{i:03d}"\naddress = "gpu{i:03d}.fake"\n[telemetry]\n{tel}interval_ms = 1000\n'
        )
        for i in range(n)
    ]


EXPORTER = """
import math, sys, time
from aiohttp import web
hosts, gpus, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
NAMES = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
         "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_XID_ERRORS"]
async def metrics(request):
    t = time.time()
    out = []
    for name in NAMES:
        out.append(f"# TYPE {name} gauge")
        for h in range(hosts):
            for g in range(gpus):
                u = int(50 + 45 * math.sin((t + h + g) / 7.0))
                v = {"DCGM_FI_DEV_FB_FREE": 143771 - 20000 - 100 * u, "DCGM_FI_DEV_FB_USED": 20000 + 100 * u,
                     "DCGM_FI_DEV_POWER_USAGE": 100 + 6 * u, "DCGM_FI_DEV_GPU_TEMP": 40 + u // 5,
                     "DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_DEV_XID_ERRORS": 0}.get(name, u)
                out.append(f'{name}{{gpu="{g}",UUID="GPU-{h:04d}-{g:04d}",device="nvidia{g}",'
                           f'modelName="NVIDIA H200",Hostname="gpu{h:03d}"}} {v}')
    return web.Response(text="\\n".join(out) + "\\n", content_type="text/plain")
app = web.Application()
app.router.add_get("/metrics", metrics)
web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
"""


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def scrape(url: str) -> tuple[float, int]:
    """(seconds, bytes) of one /metrics scrape by curl."""
    proc = await asyncio.create_subprocess_exec(
        "curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", url,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    t, size = out.decode().split()
    return float(t), int(size)


async def main(ns: argparse.Namespace) -> None:
    FakeHost.gpus = ns.gpus
    hosts_mod.make_transport = FakeHost  # type: ignore[assignment]  # in-process hosts, benchmark only
    prom_url = None
    children: list[Any] = []
    if ns.source == "prometheus":
        from tests.collector.prom import Prometheus, wait_http

        eport = free_port()
        argv = [sys.executable, "-c", EXPORTER, str(ns.hosts), str(ns.gpus), str(eport)]
        exporter = await asyncio.to_thread(subprocess.Popen, argv)
        children.append(exporter)
        await asyncio.to_thread(
            wait_http, f"http://127.0.0.1:{eport}/metrics", 30, "the DCGM-shaped exporter"
        )
        prom = await asyncio.to_thread(Prometheus, Path(ns.tmp) / "prom", [f"127.0.0.1:{eport}"])
        children.append(prom)
        await asyncio.to_thread(
            prom.wait_query,
            f'DCGM_FI_DEV_GPU_UTIL{{Hostname="gpu{ns.hosts - 1:03d}"}}',
            60,
            "the DCGM series",
        )
        prom_url = prom.url
    fleet = fleet_mod.Fleet(
        profiles(ns.hosts, prom_url),
        todos_path=Path(ns.tmp) / "todos.json",
        history_path=Path(ns.tmp) / "h.jsonl",
        auto_complete_todos=False,
    )
    port = free_port()
    stop = asyncio.Event()
    colls: list[Collector] = []
    task = asyncio.create_task(serve(fleet, "127.0.0.1", port, stop=stop, setup=colls.append))
    base = f"http://127.0.0.1:{port}"
    readers = []
    while not colls or not colls[0].ready:
        await asyncio.sleep(0.2)
    for _ in range(ns.event_clients):
        argv = ["curl", "-s", "-N", "-o", "/dev/null", f"{base}/events"]
        readers.append(await asyncio.create_subprocess_exec(*argv))
    await asyncio.sleep(ns.warmup)
    me = psutil.Process()
    events0 = sum(colls[0].counters.events.values())
    c0, t0 = cpu_s(), time.monotonic()
    lat: list[float] = []
    size = 0
    rss_peak = 0
    while time.monotonic() - t0 < ns.seconds:
        dt, size = await scrape(f"{base}/metrics")
        lat.append(dt)
        rss_peak = max(rss_peak, me.memory_info().rss)
        await asyncio.sleep(ns.scrape_interval)
    c1, t1 = cpu_s(), time.monotonic()
    events = sum(colls[0].counters.events.values()) - events0
    gpus_seen = sum(len(h.gpus) for h in fleet.snapshot().hosts)
    for r in readers:
        r.terminate()
        await r.wait()
    stop.set()
    await task
    for ch in children:
        if isinstance(ch, subprocess.Popen):
            ch.terminate()
            ch.wait(10)
        else:
            ch.stop()
    cpu_pct = 100.0 * (c1 - c0) / (t1 - t0)
    lat_ms = sorted(x * 1000 for x in lat)
    p95 = lat_ms[min(len(lat_ms) - 1, int(0.95 * len(lat_ms)))]
    rows = [
        ["hosts × GPUs", f"{ns.hosts} × {ns.gpus} ({gpus_seen} GPUs in the snapshot)"],
        [
            "GPU telemetry",
            "ssh sampler stream (fake, in-process)"
            if ns.source == "ssh"
            else "DCGM series read from a real Prometheus (one shared query a second)",
        ],
        ["sample rate", "1 Hz per host"],
        ["measured window", f"{t1 - t0:.0f} s after {ns.warmup:g} s warm-up"],
        ["fleet events handled", f"{events} ({events / (t1 - t0):.0f}/s)"],
        ["event-stream clients", str(ns.event_clients)],
        ["CPU (% of one core)", f"{cpu_pct:.1f} %"],
        ["peak RSS", f"{rss_peak / 1e6:.0f} MB"],
        ["/metrics size", f"{size / 1e3:.0f} kB"],
        [
            "/metrics scrape latency",
            f"median {statistics.median(lat_ms):.1f} ms, p95 {p95:.1f} ms, max {lat_ms[-1]:.1f} ms "
            f"({len(lat_ms)} scrapes, every {ns.scrape_interval:g} s)",
        ],
    ]
    w = max(len(r[0]) for r in rows)
    print(f"\ncollector benchmark (goal: < 10 % of one core, < 300 MB)  cpus={os.cpu_count()}")
    print(f"| {'what'.ljust(w)} | result |")
    print(f"|{'-' * (w + 2)}|--------|")
    for k, v in rows:
        print(f"| {k.ljust(w)} | {v} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--scrape-interval", type=float, default=5.0)
    ap.add_argument("--event-clients", type=int, default=1)
    ap.add_argument("--source", choices=["ssh", "prometheus"], default="ssh")
    ns = ap.parse_args()
    if not shutil.which("curl"):
        sys.exit("benchmarks/collector.py needs curl")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ns.tmp = tmp
        asyncio.run(main(ns))

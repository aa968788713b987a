"""A DCGM-exporter-shaped /metrics endpoint (real metric names, labels and units of dcgm-exporter's default
counters), served by aiohttp on loopback, for a real Prometheus to scrape."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]
HELP = {
    "DCGM_FI_DEV_SM_CLOCK": "SM clock frequency (in MHz).",
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "Memory utilization (in %).",
    "DCGM_FI_DEV_XID_ERRORS": "Value of the last XID error encountered.",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
}


@dataclass
class FakeGpu:
    hostname: str
    gpu: int
    util: float
    fb_used: float
    fb_free: float
    power: float
    temp: float
    xid: float = 0.0
    sm_clock: float = 1980.0
    model: str = "NVIDIA H200"

    @property
    def uuid(self) -> str:
        return f"GPU-{self.hostname}-{self.gpu:04d}-0000-0000-000000000000"

    def values(self) -> dict[str, float]:
        return {
            "DCGM_FI_DEV_SM_CLOCK": self.sm_clock,
            "DCGM_FI_DEV_GPU_TEMP": self.temp,
            "DCGM_FI_DEV_POWER_USAGE": self.power,
            "DCGM_FI_DEV_GPU_UTIL": self.util,
            "DCGM_FI_DEV_MEM_COPY_UTIL": self.util / 2,
            "DCGM_FI_DEV_XID_ERRORS": self.xid,
            "DCGM_FI_DEV_FB_FREE": self.fb_free,
            "DCGM_FI_DEV_FB_USED": self.fb_used,
        }


class FakeDcgm(Collector):
    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus

    def collect(self) -> Iterator[Metric]:
        for name, doc in HELP.items():
            fam = GaugeMetricFamily(name, doc, labels=LABELS)
            for g in self.gpus:
                fam.add_metric(
                    [
                        str(g.gpu),
                        g.uuid,
                        f"00000000:{g.gpu + 0x18:02X}:00.0",
                        f"nvidia{g.gpu}",
                        g.model,
                        g.hostname,
                        "550.54.15",
                    ],
                    g.values()[name],
                )
            yield fam


async def start_exporter(dcgm: FakeDcgm, port: int) -> web.AppRunner:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(dcgm)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(reg), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner

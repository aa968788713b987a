"""`[telemetry] source = "prometheus"`: a real Prometheus scrapes a DCGM-exporter-shaped endpoint and the TUI
(Pilot) shows those GPUs, read through the Prometheus HTTP API; a GPU that stops being reported is marked."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ddtree_tui.config import load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.snapshot import HostView
from ddtree_tui.ui.app import DDTreeApp
from tests.app.screen_text import screen_text, until
from tests.collector.dcgm import FakeDcgm, FakeGpu, start_exporter
from tests.collector.prom import Prometheus
from tests.util import BUSY_SLACK_S, free_port
from tests.util import until as wait_for


def _profile(tmp_path: Path, prom_url: str) -> Path:
    p = tmp_path / "gpu-node-7.toml"
    p.write_text(
        'name = "gpu-node-7"\naddress = "local"\nworkdir = ".ddtree/w"\n'
        f'[telemetry]\nsource = "prometheus"\nprometheus_url = "{prom_url}"\ninterval_ms = 500\n',
        encoding="utf-8",
    )
    return p


@contextlib.asynccontextmanager
async def _exported(
    prometheus: Callable[[list[str]], Prometheus], gpus: list[FakeGpu], host: str
) -> AsyncIterator[tuple[FakeDcgm, Prometheus]]:
    """The fake DCGM exporter serving `gpus`, scraped by a real Prometheus until `host`'s series are in."""
    dcgm = FakeDcgm(gpus)
    port = free_port()
    runner = await start_exporter(dcgm, port)
    try:
        prom = await asyncio.to_thread(prometheus, [f"127.0.0.1:{port}"])
        query = f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{host}"}}'
        await asyncio.to_thread(prom.wait_query, query, 30, "DCGM series")
        yield dcgm, prom
    finally:
        await runner.cleanup()


@pytest.mark.timeout(120)
async def test_tui_shows_gpus_from_dcgm_series_in_prometheus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prometheus: Callable[[list[str]], Prometheus]
) -> None:
    monkeypatch.chdir(tmp_path)
    async with _exported(
        prometheus,
        [
            FakeGpu("gpu-node-7", 0, util=87, fb_used=21491, fb_free=122280, power=688.5, temp=55),
            FakeGpu("gpu-node-7", 1, util=12, fb_used=1024, fb_free=142747, power=120.0, temp=41, xid=79),
            FakeGpu("other-node", 0, util=3, fb_used=0, fb_free=143771, power=80.0, temp=30),
        ],
        "gpu-node-7",
    ) as (dcgm, prom):
        prof = load_profile(_profile(tmp_path, prom.url))
        fleet = Fleet([prof], todos_path=tmp_path / "todos.json", history_path=tmp_path / "h.jsonl")
        app = DDTreeApp(fleet, refresh_hz=10)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: "gpu-node-7:1" in screen_text(app), 20, "both GPUs on screen")
            await until(pilot, lambda: "XID 79" in screen_text(app), 10, "the XID fault on GPU 1")
            notes = [n.message for n in app._notifications]
            assert any("ALERT gpu-node-7/gpu1: GPU 1: XID 79" in m for m in notes), (
                notes
            )  # the alert, as a notice
            text = screen_text(app)
            assert "gpu-node-7:0" in text and "87%" in text
            assert "other-node" not in text  # only this host's series
            h = fleet.snapshot().host("gpu-node-7")
            assert h is not None and h.telemetry.source == "prometheus" and h.telemetry.fault is None
            g0 = h.gpus[0]
            assert (g0.util_gpu, g0.mem_used_mb, g0.mem_total_mb, g0.temp_c) == (87, 21491, 143771, 55)
            assert g0.power_w == 688.5 and g0.name == "NVIDIA H200" and g0.health == "ok"
            assert h.gpus[1].health == "fault"
            assert h.telemetry.driver_version == "550.54.15"
            # GPU 0 stops being exported: Prometheus marks it stale, the TUI keeps it and says so
            dcgm.gpus = [g for g in dcgm.gpus if not (g.hostname == "gpu-node-7" and g.gpu == 0)]
            await until(pilot, lambda: "no longer reported" in screen_text(app), 20, "GPU 0 marked as gone")
            await app.shutdown_fleet()


def test_prometheus_source_needs_a_url(tmp_path: Path) -> None:
    from ddtree_tui.config import ProfileError

    p = tmp_path / "x.toml"
    p.write_text('name = "x"\n[telemetry]\nsource = "prometheus"\n', encoding="utf-8")
    with pytest.raises(ProfileError, match="prometheus_url"):
        load_profile(p)


def test_query_selects_the_dcgm_fields_of_one_host_with_quoting() -> None:
    from ddtree_tui.telemetry.prometheus import host_query

    q = host_query("Hostname", 'we"ird')
    assert q.startswith('{__name__=~"DCGM_FI_DEV_GPU_UTIL|') and 'Hostname="we\\"ird"' in q


@pytest.mark.timeout(120)
async def test_hosts_on_one_prometheus_share_one_query_per_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prometheus: Callable[[list[str]], Prometheus]
) -> None:
    from ddtree_tui.telemetry.prometheus import shared_poller

    monkeypatch.chdir(tmp_path)
    fleet: Fleet | None = None
    async with _exported(
        prometheus,
        [
            FakeGpu("node-a", 0, util=11, fb_used=1, fb_free=99, power=100, temp=40),
            FakeGpu("node-b", 0, util=22, fb_used=2, fb_free=98, power=200, temp=41),
            FakeGpu("node-b", 1, util=33, fb_used=3, fb_free=97, power=300, temp=42),
        ],
        "node-b",
    ) as (_, prom):
        try:
            profs = []
            for name in ("node-a", "node-b"):
                p = tmp_path / f"{name}.toml"
                p.write_text(
                    f'name = "{name}"\n[telemetry]\nsource = "prometheus"\nprometheus_url = "{prom.url}"\n'
                    "interval_ms = 200\n",
                    encoding="utf-8",
                )
                profs.append(load_profile(p))
            fleet = Fleet(profs, todos_path=tmp_path / "todos.json")
            await fleet.start()
            await fleet.wait_settled(20)
            snap = fleet.snapshot()
            assert [g.util_gpu for g in snap.host("node-a").gpus] == [11]  # type: ignore[union-attr]
            assert [g.util_gpu for g in snap.host("node-b").gpus] == [22, 33]  # type: ignore[union-attr]
            poller = shared_poller(profs[0], 0.2)
            assert poller is shared_poller(profs[1], 0.2)
            assert sorted(poller.subscribers) == ["node-a", "node-b"] and poller.queries >= 1
            await asyncio.to_thread(prom.stop)  # Prometheus goes away: a fault on screen, the GPUs kept
            # waited for until it says "not answering", not for the first fault: a tick that lands while
            # Prometheus shuts down reads its "HTTP 503" first (seen on a busy machine); the next ones no answer
            f = fleet

            def gone() -> HostView | None:
                h = f.snapshot().host("node-b")
                return h if h is not None and "not answering" in (h.telemetry.fault or "") else None

            h = await wait_for(gone, 10 + BUSY_SLACK_S, "node-b's fault: Prometheus not answering",
                            detail=lambda: f.snapshot().host("node-b"))  # fmt: skip
            assert [g.index for g in h.gpus] == [0, 1]
        finally:
            if fleet is not None:
                await fleet.stop()

"""The simulator's time scale (SimConfig.time_scale, DDTREE_SIM_TIME_SCALE for `ddtree-tui sim`): the tests
fast-forward simulators whose real pace is not what they check. Scaled, a server is one whose rates are that many
times higher; it says so (banner, /server_info); unscaled its output is what it always was."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from ddtree_tui.sim.config import TIME_SCALE_ENV, SimConfig, env_time_scale
from ddtree_tui.sim.engine import SimEngine
from ddtree_tui.sim.process import SimProcess
from ddtree_tui.sim.server import SimServer


async def test_a_scaled_server_runs_the_same_schedule_faster() -> None:
    """10 passes a second scaled 50x: the 60 passes of 200 tokens take 1.2 s of model time, 24 ms of real time.
    Pacing by deadlines never ends early, so the lower bound holds on any machine; the upper bound is the
    unscaled time, which only a machine 50x slower than needed could miss."""
    cfg = SimConfig(decode_rate=10, accept_length=3.4, seed=4, time_scale=50)
    sched = cfg.schedule("p", 200)
    async with SimServer(cfg, log=lambda s: None) as s:
        async with httpx.AsyncClient(base_url=s.base_url, trust_env=False) as c:
            t0 = time.monotonic()
            r = await c.post("/generate", json={"text": "p", "sampling_params": {"max_new_tokens": 200}})
            took = time.monotonic() - t0
            info = (await c.get("/server_info")).json()
    meta = r.json()["meta_info"]
    assert meta["completion_tokens"] == 200 and meta["spec_verify_ct"] == len(sched)
    assert len(sched) / (10 * 50) <= meta["e2e_latency"] <= took < len(sched) / 10
    assert info["sim"]["time_scale"] == 50 and info["sim"]["decode_rate"] == 10
    assert "time_scale=50 (simulated time runs faster)" in s.banner()


async def test_load_time_health_latency_and_drift_follow_the_scale() -> None:
    cfg = SimConfig(load_time=30, health_latency=20, slowdown_after=100, slowdown_factor=3, time_scale=1000)
    async with SimServer(cfg, log=lambda s: None) as s:
        async with httpx.AsyncClient(base_url=s.base_url, trust_env=False) as c:
            while (await c.get("/health", timeout=5)).status_code != 200:  # 30 ms of real loading
                pass
            await c.post("/generate", json={"text": "p", "sampling_params": {"max_new_tokens": 4}})
        await asyncio.sleep(0.15)  # 150 model seconds after the first request: past slowdown_after
        assert s.drift_clock() >= 100 and s.slowdown() == 3


async def test_drift_started_on_request_starts_then() -> None:
    """POST /sim/drift starts a configured drift now, whatever its `*_after` (a soak test times it to its own
    windows); the other drift stays off; a body that names no drift is refused."""
    cfg = SimConfig(
        slowdown_after=1e9, slowdown_factor=3, mem_creep_after=1e9, mem_creep_mib_s=100, time_scale=1000
    )
    async with SimServer(cfg, log=lambda s: None) as s:
        async with httpx.AsyncClient(base_url=s.base_url, trust_env=False) as c:
            for bad in ({"start": ["speed"]}, {"start": "slowdown"}, {}):
                assert (await c.post("/sim/drift", json=bad)).status_code == 400
            assert s.slowdown() == 1 and s.gpu_memory_mib() == 40000
            r = await c.post("/sim/drift", json={"start": ["slowdown"]})
            assert r.status_code == 200 and r.json()["slowdown_after"] <= r.json()["drift_clock"] < 1e9
            assert s.slowdown() == 3 and s.gpu_memory_mib() == 40000 and s.cfg.mem_creep_after == 1e9
            r = await c.post("/sim/drift", json={"start": ["mem_creep"]})
            assert r.status_code == 200 and r.json()["mem_creep_after"] < 1e9
            await asyncio.sleep(0.01)  # 10 model seconds: 1000 MiB more
            assert s.gpu_memory_mib() > 40000


def test_unscaled_is_real_time_and_says_nothing_new() -> None:
    cfg = SimConfig()
    assert cfg.time_scale == 1 and cfg.real_seconds(2.5) == 2.5 and cfg.step_seconds(1) == 1 / 40
    eng = SimEngine(cfg, log=lambda s: None)
    assert eng.drift_clock() == 0.0
    assert (
        "time_scale" not in SimServer(cfg).banner()
        and "time_scale" not in SimServer(cfg).server_info()["sim"]
    )


def test_the_environment_variable_and_its_errors() -> None:
    assert env_time_scale({}) == 1.0 and env_time_scale({TIME_SCALE_ENV: " "}) == 1.0
    assert env_time_scale({TIME_SCALE_ENV: "20"}) == 20.0
    for bad in ("fast", "0", "-2", "1e9"):
        with pytest.raises(ValueError, match=TIME_SCALE_ENV):
            env_time_scale({TIME_SCALE_ENV: bad})


@pytest.mark.slow
def test_a_child_process_takes_its_scale_from_the_environment() -> None:
    with SimProcess(SimConfig(load_time=0, time_scale=25)) as p:
        info = httpx.get(p.base_url + "/server_info", trust_env=False).json()
        assert info["sim"]["time_scale"] == 25 and "time_scale=25" in p.output()

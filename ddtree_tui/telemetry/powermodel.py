"""The modelled GPU of the simulator and the demo's replay: power (and utilisation, SM clock, temperature)
that follows the simulated load, so a demo run's energy per token means something (issue 26).

Why a module of its own: the replay (telemetry/sources.py) and the simulator's GET /sim/gpu draw the same
curve, and the replay's own fixes (what it shows while a service is only starting) stay in the replay: it
calls `follow_load(frame, running)` on the frame it chose, with the running requests of the simulated
services on each GPU (`sim_running`, read from their GET /sim/gpu). Everything here is MODELLED, not
measured, and labelled so wherever it is shown (the source stays "replay" / "sim").

The curve, per GPU with r requests running (constants below, each a modelling choice):
  r = 0: idle, POWER_IDLE_W (an H200 with a model loaded and nothing running draws about this);
  r ≥ 1: P = IDLE + (TDP − IDLE) × (ACTIVE_FLOOR + (1 − ACTIVE_FLOOR) × (1 − exp(−(r − 1) / BATCH_SCALE))),
  rising from the floor a single decode stream draws toward the H200's TDP as the batch grows.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import aiohttp

from ddtree_tui.lib import http
from ddtree_tui.lib.jsontypes import JsonObject, JsonValue

if TYPE_CHECKING:  # a type only: the simulator imports this module and never builds a profile
    from ddtree_tui.config import HostProfile

# --- modelled constants (not measurements) ------------------------------------------------------------------
POWER_IDLE_W = 75.0  # modelled: an idle H200 with weights resident
POWER_TDP_W = 700.0  # the H200 SXM's board power limit (its spec sheet; the recording's power_limit_w)
POWER_ACTIVE_FLOOR = 0.35  # modelled: one decode stream (memory-bound) uses ~35 % of the idle→TDP range
POWER_BATCH_SCALE = 16.0  # modelled: requests over which the rise toward TDP is ~63 % done
UTIL_ACTIVE_PCT = 85.0  # modelled: utilisation with one request running, rising to 100 % with the batch
SM_CLOCK_IDLE_MHZ = 345  # the recording's idle SM clock (tests/fixtures/gpu)
SM_CLOCK_BUSY_MHZ = 1980  # the H200's max SM clock, held under load (the recording's busy rows)
TEMP_IDLE_C = 34.0  # the recording's idle temperature
TEMP_PER_W = 0.06  # modelled: °C above idle per W above idle (steady state; no thermal lag)
SIM_GPU_TIMEOUT_S = 0.5  # a simulated service that does not answer /sim/gpu in this adds no load


def power_w(running: int) -> float:
    """The modelled board power with `running` requests on the GPU."""
    if running <= 0:
        return POWER_IDLE_W
    rise = POWER_ACTIVE_FLOOR + (1 - POWER_ACTIVE_FLOOR) * (1 - math.exp(-(running - 1) / POWER_BATCH_SCALE))
    return POWER_IDLE_W + (POWER_TDP_W - POWER_IDLE_W) * rise


def modelled(running: int) -> dict[str, float]:
    """The modelled fields of one GPU with `running` requests: power, utilisation, SM clock, temperature."""
    p = power_w(running)
    util = 0.0 if running <= 0 else min(100.0, UTIL_ACTIVE_PCT + (100 - UTIL_ACTIVE_PCT) * (1 - 1 / running))
    return {
        "power_w": round(p, 2),
        "util_gpu": round(util),
        "sm_clock_mhz": SM_CLOCK_BUSY_MHZ if running > 0 else SM_CLOCK_IDLE_MHZ,
        "temp_c": round(TEMP_IDLE_C + TEMP_PER_W * (p - POWER_IDLE_W)),
    }


def follow_load(frame: Mapping[str, JsonValue], running: Mapping[int, int]) -> JsonObject:
    """A sampler line whose GPUs named in `running` (index -> requests running) draw the modelled power
    and utilisation; the other GPUs and fields as they were."""
    out = dict(frame)
    gpus = frame.get("gpus")
    if isinstance(gpus, list):
        out["gpus"] = [_follow(g, running) for g in gpus]
    return out


def _follow(g: JsonValue, running: Mapping[int, int]) -> JsonValue:
    """One GPU of a sampler line with the modelled fields when `running` names its index."""
    if isinstance(g, dict) and isinstance(idx := g.get("index"), int) and idx in running:
        return {**g, **modelled(running[idx])}
    return g


async def sim_running(profile: HostProfile) -> dict[int, int] | None:
    """Requests running on each GPU of a local host's simulated services (their GET /sim/gpu), by the
    services' profile `gpus` (GPU 0 when none); None when the host runs no simulated service or none
    answered (the recording then plays as it was)."""
    sims = [s for s in profile.service if s.launcher == "sim"]
    if not sims:
        return None

    async def one(client: aiohttp.ClientSession, port: int) -> int | None:
        try:
            async with client.get(f"http://127.0.0.1:{port}/sim/gpu") as resp:
                body = await http.read_json(resp, 64 * 1024) if resp.status == 200 else None
        except Exception:  # a service starting, stopped or busy: it adds no load this tick
            return None
        n = body.get("running_requests") if isinstance(body, dict) else None
        return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None

    async with http.session(timeout=SIM_GPU_TIMEOUT_S) as client:
        got = await asyncio.gather(*(one(client, s.port) for s in sims))
    if all(n is None for n in got):
        return None
    out: dict[int, int] = {}
    for s, n in zip(sims, got, strict=True):
        for gpu in list(s.gpus) or [0]:
            out[gpu] = out.get(gpu, 0) + (n or 0)
    return out

"""HTTP health probes of one SGLang (or simulated) server through the transport's port forward.

`/health` decides ready / not ready; `/server_info` (older builds: `/get_server_info`) and `/model_info`
(`/get_model_info`) fill in what the server says it runs. Timeouts are short, the manager's one aiohttp
session is reused (a probe every two seconds rides one kept-alive connection, one forwarded channel over
ssh), and every body is read under its cap (`probehttp`).
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
from pydantic import BaseModel, ConfigDict

from ddtree_tui.services.probehttp import MAX_HEALTH_BODY, MAX_INFO_BODY, BodyTooLarge, get_capped, why


class HealthResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    ok: bool
    status_code: int | None = None
    error: str | None = None  # why not ok, in words
    latency_ms: float | None = None
    ts: float = 0.0


class ServerInfo(BaseModel):
    """What /server_info (and /model_info) said; missing keys are None."""

    model_config = ConfigDict(frozen=True)

    speculative_algorithm: str | None = None
    model_path: str | None = None
    tp_size: int | None = None
    avg_spec_accept_length: float | None = None
    last_gen_throughput: float | None = None
    version: str | None = None
    simulated: bool = False


async def probe_health(session: aiohttp.ClientSession, base_url: str, timeout: float = 5.0) -> HealthResult:
    """GET /health: ok only on 200; latency in ms either way. A body over MAX_HEALTH_BODY is a failed probe."""
    t0 = time.perf_counter()
    try:
        code, _ = await get_capped(session, f"{base_url}/health", cap=MAX_HEALTH_BODY, timeout=timeout)
    except (aiohttp.ClientError, TimeoutError, OSError, BodyTooLarge) as e:
        return HealthResult(ok=False, error=why(e), ts=time.time())
    ms = (time.perf_counter() - t0) * 1000
    if code == 200:
        return HealthResult(ok=True, status_code=200, latency_ms=ms, ts=time.time())
    return HealthResult(
        ok=False,
        status_code=code,
        error=f"/health returned HTTP {code}",
        latency_ms=ms,
        ts=time.time(),
    )


async def _get_json(
    session: aiohttp.ClientSession, base_url: str, paths: tuple[str, ...], timeout: float
) -> dict[str, Any] | None:
    """The first path that answers 200 with a JSON object; falls back on 404/405 only. A body over
    MAX_INFO_BODY raises BodyTooLarge (the caller says so); a server that cannot be reached is None."""
    for path in paths:
        try:
            code, body = await get_capped(session, f"{base_url}{path}", cap=MAX_INFO_BODY, timeout=timeout)
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None
        if code in (404, 405):
            continue
        if code != 200:
            return None
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    return None


def _f(v: object) -> float | None:
    try:
        return float(v) if v is not None else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _parse_server_info(info: dict[str, Any] | None, model_info: dict[str, Any] | None = None) -> ServerInfo:
    info = info or {}
    states = info.get("internal_states")
    st0 = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    tp = info.get("tp_size")
    model = info.get("model_path") or (model_info or {}).get("model_path")
    return ServerInfo(
        speculative_algorithm=info.get("speculative_algorithm"),
        model_path=model,
        tp_size=int(tp) if isinstance(tp, int | float) else None,
        avg_spec_accept_length=_f(st0.get("avg_spec_accept_length")),
        last_gen_throughput=_f(st0.get("last_gen_throughput")),
        version=info.get("version"),
        simulated=bool(info.get("simulated") or (model_info or {}).get("simulated")),
    )


async def fetch_server_info(
    session: aiohttp.ClientSession, base_url: str, timeout: float = 5.0, with_model_info: bool = True
) -> ServerInfo | None:
    """/server_info then /get_server_info; /model_info then /get_model_info. None when neither answers;
    BodyTooLarge when one of them sends a body over MAX_INFO_BODY."""
    info = await _get_json(session, base_url, ("/server_info", "/get_server_info"), timeout)
    minfo = None
    if with_model_info:
        minfo = await _get_json(session, base_url, ("/model_info", "/get_model_info"), timeout)
    if info is None and minfo is None:
        return None
    return _parse_server_info(info, minfo)

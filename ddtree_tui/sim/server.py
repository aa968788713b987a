"""An SGLang-compatible simulated server: the embedded default of the demo and the server of the tests.

Real SGLang needs a GPU, so everything that talks to a service (health probes, the benchmark, the log parser)
is exercised against this instead. It speaks SGLang's wire format (native `/generate` SSE with cumulative or
incremental text and `meta_info`, the OpenAI endpoints, `/server_info`, Prometheus `/metrics`, scheduler log
lines) and is deterministic: one verify pass every `1/decode_rate` seconds emits `k` tokens, `k` drawn from a
seeded distribution whose mean is the accept length, so the true tok/s of any request is known exactly from
`schedule()`. It always says it is simulated (banner, `/server_info`).

Built on aiohttp's web server: well kept, native streaming responses, already a dependency. The parts:
`config.py` (SimConfig, the real server's constants, the DDTree and schedule model), `engine.py` (pacing,
cache, KV, faults, log lines), `endpoints.py` (the generation wire formats), this module (the info
endpoints and the server's lifetime); `ddtree-tui sim` is `cli/sim.py`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from ddtree_tui.lib.jsontypes import JsonObject
from ddtree_tui.sim.config import SIM_VERSION
from ddtree_tui.sim.endpoints import SimEndpoints
from ddtree_tui.sim.metrics import prometheus_text
from ddtree_tui.telemetry.powermodel import modelled

DRIFT_KINDS = frozenset({"slowdown", "mem_creep"})  # what POST /sim/drift starts (SimConfig's drift knobs)


class SimServer(SimEndpoints):
    """One simulated SGLang server, in this process: `async with SimServer(cfg) as s: s.base_url`."""

    # --- lifecycle -----------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host = self.cfg.host if self.cfg.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        r = app.router
        r.add_get("/health", self._health)
        r.add_get("/health_generate", self._health)
        r.add_get("/server_info", self._server_info)
        r.add_get("/get_server_info", self._server_info)
        r.add_get("/model_info", self._model_info)
        r.add_get("/get_model_info", self._model_info)
        r.add_get("/v1/models", self._models)
        r.add_route("*", "/flush_cache", self._flush_cache)
        r.add_get("/metrics", self._metrics)
        r.add_get("/sim/gpu", self._sim_gpu)
        r.add_post("/sim/drift", self._sim_drift)
        r.add_post("/generate", self._generate)
        r.add_post("/v1/chat/completions", self._chat)
        r.add_post("/v1/completions", self._completions)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.cfg.host, self.cfg.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self._started = time.monotonic()

    async def stop(self) -> None:
        """Answer 503 from now on, then close every connection (stalled streams included)."""
        await super().stop()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def banner(self) -> str:
        c = self.cfg
        return (
            f"*** SIMULATED SGLang server (ddtree-tui sim {SIM_VERSION}) — no model, no GPU ***\n"
            f"algorithm={c.algorithm} mode={c.display_mode} speculative_algorithm={c.speculative_algorithm} "
            f"accept_length={c.effective_accept_length} decode_rate={c.decode_rate}/s seed={c.seed} "
            f"model_path={c.model_path} listening on {self.base_url}"
            + (f" ddtree budget={c.budget} max_topk={c.topk} hybrid={c.hybrid}" if c.ddtree_modelled else "")
            + (f" time_scale={c.time_scale:g} (simulated time runs faster)" if c.time_scale != 1 else "")
        )

    # --- info endpoints ------------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        """200 when serving. With `health_latency` it takes as long as 0.5.23's health_generate (a 1-token
        generation, then `sleep(1)` before its first look), and an idle server logs that generation's
        Prefill batch line, as the real one does on every probe."""
        if self.loading or self._shutting_down:
            return web.Response(status=503)
        if self.cfg.health_latency > 0:
            if self.stats.running == 0:
                self._log_prefill(1, 1, 0, self.stats.running_tokens + 1)
            await asyncio.sleep(self.cfg.real_seconds(self.cfg.health_latency))
            if self._shutting_down:
                return web.Response(status=503)
        return web.Response(status=200)

    async def _sim_gpu(self, request: web.Request) -> web.Response:
        """The simulator's modelled GPU (a simulator-only endpoint, labelled so): memory with any creep;
        power, utilisation and temperature from the load (telemetry/powermodel.py, modelled), and the
        requests running, which the demo's replay follows."""
        gpu = modelled(self.stats.running)
        return web.json_response(
            {
                "simulated": True,
                "running_requests": self.stats.running,
                "gpus": [
                    {
                        "index": 0,
                        "memory_used_mib": round(self.gpu_memory_mib(), 1),
                        "utilization_pct": float(gpu["util_gpu"]),
                        "power_w": gpu["power_w"],
                        "temperature_c": float(gpu["temp_c"]),
                    }
                ],
            }
        )

    async def _sim_drift(self, request: web.Request) -> web.Response:
        """Start the configured drift now (a simulator-only endpoint): `{"start": ["slowdown", "mem_creep"]}`;
        answers the drift clock and when each drift starts on it."""
        try:
            body = await request.json()
            kinds = body["start"]
            if not isinstance(kinds, list) or not set(kinds) <= DRIFT_KINDS:
                raise ValueError(kinds)
        except (ValueError, KeyError, TypeError):
            return web.json_response(
                {"error": f"want {{'start': [...]}} of {sorted(DRIFT_KINDS)}"}, status=400
            )
        self.start_drift(set(kinds))
        c = self.cfg
        return web.json_response(
            {
                "simulated": True,
                "drift_clock": round(self.drift_clock(), 3),
                "slowdown_after": c.slowdown_after,
                "mem_creep_after": c.mem_creep_after,
            }
        )

    def server_info(self) -> JsonObject:
        c = self.cfg
        spec = c.speculative_algorithm is not None
        state: dict[str, Any] = {"last_gen_throughput": round(self.stats.last_gen_throughput, 2)}
        if spec:
            avg = self.stats.accepted_total / self.stats.verify_total if self.stats.verify_total else 0.0
            state["avg_spec_accept_length"] = round(avg, 4)
        return {
            "model_path": c.model_path,
            "tokenizer_path": c.model_path,
            "served_model_name": c.model_path,
            "host": c.host,
            "port": self.port,
            "tp_size": 1,
            "dp_size": 1,
            "pp_size": 1,
            "mem_fraction_static": 0.75,
            "attention_backend": "triton",
            "trust_remote_code": True,
            "enable_metrics": self.cfg.enable_metrics,
            "decode_log_interval": c.decode_log_interval,
            "incremental_streaming_output": c.incremental_streaming_output,
            "stream_interval": 1,
            "speculative_algorithm": c.speculative_algorithm,
            "speculative_draft_model_path": (c.model_path + "-DFlash") if spec else None,
            "speculative_num_steps": 1 if spec else None,
            "speculative_eagle_topk": 1 if spec else None,
            "speculative_num_draft_tokens": c.block_size if spec else None,
            "speculative_dflash_block_size": c.block_size if spec else None,
            "speculative_ddtree_budget": (c.budget or 32) if c.algorithm == "ddtree" else None,
            "speculative_ddtree_max_topk": c.topk if c.algorithm == "ddtree" else None,
            "speculative_ddtree_shadow_linear": (c.display_mode == "shadow-linear")
            if c.algorithm == "ddtree"
            else None,
            "version": SIM_VERSION,
            "simulated": True,
            "sim": {
                "algorithm": c.algorithm,
                "mode": c.display_mode,
                "accept_length": c.effective_accept_length,
                "accept_spread": c.accept_spread,  # per-prompt factor on accept length (sim/config.py, modelled)
                "decode_rate": c.decode_rate,
                "budget": c.budget,
                "max_topk": c.max_topk,
                "hybrid": c.hybrid,
                "seed": c.seed,
                "faults": [f.model_dump() for f in self.faults],
                **({"time_scale": c.time_scale} if c.time_scale != 1 else {}),
            },
            "max_total_num_tokens": c.kv_capacity or 1_000_000,
            "max_running_requests": c.max_running_requests or None,
            "context_length": c.context_length,
            "internal_states": [state],
        }

    async def _server_info(self, request: web.Request) -> web.Response:
        return web.json_response(self.server_info())

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "model_path": self.cfg.model_path,
                "tokenizer_path": self.cfg.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "simulated": True,
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.cfg.model_path,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": self.cfg.model_path,
                        "max_model_len": 262144,
                    }
                ],
            }
        )

    async def _flush_cache(self, request: web.Request) -> web.Response:
        """0.5.23's /flush_cache: the scheduler flushes only when fully idle (no running or waiting request),
        else it logs why and the endpoint answers 400; with `?timeout=S` (0.5.23, flush_wrapper.py) it waits
        up to S seconds for idle first ("Timed out waiting for idle state." past it)."""
        st = self.stats
        try:
            wait = float(request.query.get("timeout", "0"))
        except ValueError:
            wait = -1.0
        if not wait >= 0:
            return web.json_response(
                {"detail": [{"loc": ["query", "timeout"], "msg": "bad timeout"}]}, status=422
            )
        if wait > 0 and (st.running or st.queued):
            deadline = time.monotonic() + wait
            while (st.running or st.queued) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            if st.running or st.queued:
                return web.Response(text="Timed out waiting for idle state.", status=400)
        if st.running or st.queued:
            self.log(
                "Cache not flushed because there are pending requests. "
                f"#queue-req: {st.queued}, #running-req: {st.running}"
            )
            return web.Response(text="Flush cache failed.\n", status=400)
        self._cache.clear()
        self.log("Cache flushed successfully!")
        return web.Response(
            text="Cache flushed.\nPlease check backend logs for more details. (When there are running or "
            "waiting requests, the operation will not be performed.)\n"
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        if not self.cfg.enable_metrics:  # started without --enable-metrics: FastAPI's 404
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.Response(text=prometheus_text(self.stats, self.cfg), content_type="text/plain")

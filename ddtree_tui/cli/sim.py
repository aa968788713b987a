"""`ddtree-tui sim`: one simulated SGLang server in this process until SIGTERM/SIGINT (always labelled
simulated). The options map onto SimConfig (`ddtree_tui/sim/config.py`); `--realistic` turns the real
server's behaviours on, `--openai-style transformers` another server's OpenAI dialect."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys

from ddtree_tui.cli.common import UsageError, handler
from ddtree_tui.cli.simargs import SimArgs
from ddtree_tui.sim.config import REALISTIC, TRANSFORMERS_LIKE, SimConfig, env_time_scale, parse_faults
from ddtree_tui.sim.logs import log_prefix
from ddtree_tui.sim.server import SimServer


def config_from_args(a: SimArgs) -> SimConfig:
    """The simulator's config: options not given take SimConfig's "off" value; `--realistic` fills the real
    server's values in where not given, `--openai-style transformers` turns that dialect's switches on."""
    real = a.realistic
    openai = {name: value or a.openai_style == "transformers"
              for name, value in a.model_dump(include=set(TRANSFORMERS_LIKE)).items()}  # fmt: skip
    return SimConfig(
        algorithm=a.algorithm,
        host=a.host,
        port=a.port,
        accept_length=a.accept_length,
        decode_rate=a.decode_rate,
        load_time=a.load_time,
        seed=a.seed,
        model_path=a.model_path,
        incremental_streaming_output=a.incremental_streaming_output,
        decode_log_interval=a.decode_log_interval,
        kv_capacity=a.kv_capacity or 0,
        max_running_requests=a.max_running_requests or 0,
        disconnect_abort_s=a.disconnect_abort or 0.0,
        slowdown_after=a.slowdown_after or 0.0,
        slowdown_factor=a.slowdown_factor or 1.0,
        mem_creep_after=a.mem_creep_after or 0.0,
        mem_creep_mib_s=a.mem_creep or 0.0,
        block_size=a.block_size or 16,
        health_latency=_real_or(a.health_latency, "health_latency", real),
        prefill_rate=_real_or(a.prefill_rate, "prefill_rate", real),
        **openai,
        reasoning=a.reasoning,
        hybrid=a.hybrid,
        allow_hybrid_unsafe=a.allow_hybrid_unsafe,
        batch_slowdown=a.batch_slowdown or real,
        mode=a.sim_mode,
        faults=list(a.fault),
        exit_process=True,
        budget=a.budget,
        max_topk=_env_topk(),
        depth_bonus=_env_depth_bonus(),
        draft_window=a.draft_window,
        time_scale=env_time_scale(os.environ),  # tests fast-forward the simulators they start
        enable_metrics=not a.no_metrics,
    )


def config_from_namespace(ns: argparse.Namespace) -> SimConfig:
    return config_from_args(SimArgs.of(ns))


def _real_or(value: float | None, name: str, real: bool) -> float:
    """The option's value; when not given, the real server's (with --realistic) or 0 (off)."""
    return value if value is not None else (float(REALISTIC[name]) if real else 0.0)


def _env_topk() -> int | None:
    """SGLANG_DDTREE_MAX_TOPK from the environment, as the patched server reads it; ValueError if bad."""
    raw = os.environ.get("SGLANG_DDTREE_MAX_TOPK")
    if raw is None or not raw.strip():
        return None
    try:
        v = int(raw)
    except ValueError:
        raise ValueError(f"SGLANG_DDTREE_MAX_TOPK must be an integer, got {raw!r}") from None
    if not 1 <= v <= 64:
        raise ValueError(f"SGLANG_DDTREE_MAX_TOPK must be 1..64, got {v}")
    return v


def _env_depth_bonus() -> float | None:
    """SGLANG_DDTREE_DEPTH_BONUS from the environment (the DDTree PR's env; a number >= 0); ValueError if bad."""
    raw = os.environ.get("SGLANG_DDTREE_DEPTH_BONUS")
    if raw is None or not raw.strip():
        return None
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"SGLANG_DDTREE_DEPTH_BONUS must be a number, got {raw!r}") from None
    if not 0 <= v <= 16:
        raise ValueError(f"SGLANG_DDTREE_DEPTH_BONUS must be 0..16, got {raw}")
    return v


async def serve(cfg: SimConfig) -> int:
    """Run until SIGTERM/SIGINT; /health answers 503 while shutting down."""
    refusal = cfg.startup_error()
    if refusal:
        print(log_prefix() + f"ValueError: {refusal}", file=sys.stderr, flush=True)
        return 1
    server = SimServer(cfg)
    try:
        await server.start()
    except OSError as e:
        print(f"ddtree-tui sim: cannot listen on {cfg.host}:{cfg.port}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(server.banner(), file=sys.stderr, flush=True)
    server.log(f"The server is fired up and ready to roll! (SIMULATED, load time {cfg.load_time:g} s)")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.ensure_future(server.exited.wait())
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    stopper.cancel()
    server.log("Received shutdown signal, shutting down (SIMULATED).")
    await server.stop()
    return 0


@handler("sim", SimArgs)
def cli_main(args: SimArgs) -> int:
    try:
        cfg = config_from_args(args)
        parse_faults(cfg.faults)
    except ValueError as e:
        raise UsageError(str(e)) from e
    return asyncio.run(serve(cfg))

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
from typing import Any

from ddtree_tui.cli.common import UsageError, handler
from ddtree_tui.sim.config import REALISTIC, TRANSFORMERS_LIKE, SimConfig, env_time_scale, parse_faults
from ddtree_tui.sim.logs import log_prefix
from ddtree_tui.sim.server import SimServer

# SimConfig fields taken from the namespace as they are
AS_IS = ("algorithm", "host", "port", "accept_length", "decode_rate", "load_time", "seed", "model_path",
         "incremental_streaming_output", "decode_log_interval")  # fmt: skip
# SimConfig field: (namespace attribute, the value when the option is not given)
OR_DEFAULT: dict[str, tuple[str, Any]] = {
    "kv_capacity": ("kv_capacity", 0),
    "max_running_requests": ("max_running_requests", 0),
    "slowdown_after": ("slowdown_after", 0.0),
    "slowdown_factor": ("slowdown_factor", 1.0),
    "mem_creep_after": ("mem_creep_after", 0.0),
    "mem_creep_mib_s": ("mem_creep", 0.0),
    "block_size": ("block_size", 16),
}
# the options --realistic gives a value (SimConfig.realistic's) when they are not given; off: 0
REALISTIC_VALUES = ("health_latency", "prefill_rate")
FLAGS = ("reasoning", "hybrid", "allow_hybrid_unsafe")


def config_from_namespace(ns: argparse.Namespace) -> SimConfig:
    real = bool(getattr(ns, "realistic", False))
    transformers = getattr(ns, "openai_style", None) == "transformers"
    kw: dict[str, Any] = {name: getattr(ns, name) for name in AS_IS}
    for name, (attr, off) in OR_DEFAULT.items():
        kw[name] = getattr(ns, attr, None) or off
    for name in REALISTIC_VALUES:
        v = getattr(ns, name, None)
        kw[name] = v if v is not None else (REALISTIC[name] if real else 0.0)
    for name in TRANSFORMERS_LIKE:  # `--openai-style transformers` turns them all on
        kw[name] = bool(getattr(ns, name, False) or transformers)
    for name in FLAGS:
        kw[name] = bool(getattr(ns, name, False))
    return SimConfig(
        **kw,
        batch_slowdown=bool(getattr(ns, "batch_slowdown", False) or real),
        mode=getattr(ns, "sim_mode", None),
        faults=list(ns.fault or []),
        exit_process=True,
        budget=getattr(ns, "budget", None),
        max_topk=_env_topk(),
        time_scale=env_time_scale(os.environ),  # tests fast-forward the simulators they start
    )


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


@handler("sim")
def cli_main(ns: argparse.Namespace) -> int:
    try:
        cfg = config_from_namespace(ns)
        parse_faults(cfg.faults)
    except ValueError as e:
        raise UsageError(str(e)) from e
    return asyncio.run(serve(cfg))

"""An SGLang-compatible simulated server: the embedded default of the demo and the server of the tests.

Real SGLang needs a GPU, so everything that talks to a service (health probes, the benchmark, the log parser)
is exercised against this instead. It speaks SGLang's wire format (native `/generate` SSE with cumulative or
incremental text and `meta_info`, the OpenAI endpoints, `/server_info`, Prometheus `/metrics`, scheduler log
lines) and is deterministic: one verify pass every `1/decode_rate` seconds emits `k` tokens, `k` drawn from a
seeded distribution whose mean is the accept length, so the true tok/s of any request is known exactly from
`schedule()`. It always says it is simulated (banner, `/server_info`).

Built on aiohttp's web server: well kept, native streaming responses, already a dependency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

SIM_VERSION = "0.5.23-sim"
DEFAULT_ACCEPT_LENGTH = 3.4

# --- the real server's behaviour, each constant with where it comes from ---------------------------------
# /health on 0.5.23 runs a 1-token generation and polls for it with `await asyncio.sleep(1)` before the first
# check (entrypoints/http_server.py health_generate; SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION defaults on),
# so an idle server answers after ~1 s and logs a Prefill batch line for the probe.
REAL_HEALTH_LATENCY_S = 1.0
# SGLANG_HEALTH_CHECK_TIMEOUT's default (http_server.py): a wedged server answers 503 after this.
REAL_HEALTH_TIMEOUT_S = 20.0
# Prefill throughput for the TTFT model (TTFT = uncached prompt tokens / rate + one decode step). An
# assumption of the right order for one H200 and a ~3B-active MoE target, not a measurement: it only has to
# make TTFT grow with the prompt, as it does on every real server.
REAL_PREFILL_TOKENS_PER_S = 10000.0
# Step time grows with the running batch: step(b) = step(1) * (1 + g * (b - 1)). Decode without speculation
# is memory-bound, so 32 requests cost ~1.3x one (g = 0.01, an assumption). DFlash's speedup over that
# baseline was measured upstream at about 2.0x at concurrency 1 falling to about 1.14x at 32 (issue 13, from
# the DFlash PR's benchmarks, sglang PR #22077); with the same per-pass acceptance that needs
# (1 + 31 g_spec) = (1 + 31 g_base) * 2.0 / 1.14, so g_spec = 0.0419.
BATCH_GROWTH_BASELINE = 0.01
# the speculative growth that turns DFlash's 2.0x at concurrency 1 into 1.14x at 32 (derivation above)
BATCH_GROWTH_SPEC = ((1 + 31 * BATCH_GROWTH_BASELINE) * 2.0 / 1.14 - 1) / 31
# What SGLang sends when decode retraction finds no room (managers/schedule_batch.py retract_decode).
RETRACT_ABORT_MESSAGE = "Retracted under decode memory pressure without a KV backup. Retry later."
# max_model_len the sim reports (Qwen3.6's 262144) and the bound on max_new_tokens: a request whose prompt +
# max_new_tokens exceeds it is refused with tokenizer_manager.py's own message, as the real server does.
CONTEXT_LENGTH = 262144
# The sim's prefix-cache granularity for partial matches (about 16 tokens of ~4 characters)
CACHE_PAGE_CHARS = 64
# Share of a reasoning reply that is thinking (delta.reasoning_content) before the answer: an assumption.
REASONING_SHARE = 0.4
# --- DDTree (budget, top-k, tree verify) -----------------------------------------------------------------
# The shape comes from the sources, the numbers are modelling choices tuned so the demo has an interior optimum:
# - DDTree (arXiv 2604.12989): a best-first tree of `budget` nodes from DFlash's per-position distributions,
#   verified in one target pass. Its accept length is non-decreasing in the budget (the cost-aware follow-up,
#   arXiv 2606.01813, starts from exactly that) and the paper reports the best budget per model/dataset pair,
#   i.e. an interior optimum: HumanEval on Qwen3-30B-MoE 8.22x for DDTree vs 6.09x for DFlash (about 1.35x).
# - SGLang's open DDTree PR (#29907): `--speculative-ddtree-budget N` and env `SGLANG_DDTREE_MAX_TOPK`, the
#   widest a tree node may branch.
# - An independent port measured 0.68-1.00x against chain drafting with the best budget shrinking 16 -> 8 -> 4
#   as the batch grows (issue 16): tree verify cost grows with budget *and* batch.
# accept(B, k) = 1 + (a_linear - 1) * G(k) * (1 - exp(-B / (DDTREE_BUDGET_SCALE * k)))
#   G(k) = 1 + DDTREE_TOPK_GAIN * (1 - 2^-(k-1)): wider nodes help with diminishing returns (choice);
#   the budget term saturates: a wider tree needs more nodes to reach the same depth (choice).
# step(B, k, b) = step_dflash(b) * (1 + DDTREE_NODE_COST * B * (1 + DDTREE_NODE_BATCH_COST * (b - 1)))
#                               * (1 + DDTREE_TOPK_COST * (k - 1))
# With the demo's numbers (a_linear 3.4) the best of budget {8,16,32} x top-k {1,2,4} at concurrency 1 is
# budget 16, top-k 2 (`ddtree_expected_speed` computes it), 8 % or more ahead of every other point.
DDTREE_TOPK_GAIN = 1.0
DDTREE_BUDGET_SCALE = 3.0
DDTREE_NODE_COST = 0.01  # per tree node, relative to one linear verify step (choice)
DDTREE_NODE_BATCH_COST = 0.15  # how much more a node costs per extra running request (choice)
DDTREE_TOPK_COST = 0.1  # the drafter's top-k extraction and heap, per extra branch (choice)
DDTREE_SHADOW_NODE_COST = (
    0.002  # shadow-linear builds the tree but verifies the chain: drafter-side only (choice)
)
DDTREE_DEFAULT_TOPK = 4  # when SGLANG_DDTREE_MAX_TOPK is unset (a modelling choice; the PR's default varies)
HYBRID_TREE_REFUSAL = (
    "DDTree tree verify on a hybrid (GDN/Mamba) model is unsafe: the recurrent state cannot be forked per "
    "branch; use mode shadow-linear or set allow_hybrid_unsafe"
)

FAULT_KINDS = ("slow_first_token", "stall", "http500", "malformed", "drop", "exit")
FAULT_HEADER = "X-Sim-Fault"

_WORDS = (
    "the def return if else for while in range value list node left right pivot array sort partition "
    "recursion base case fibonacci memo cache result answer is of a to and we can so first then each "
    "element smaller larger index n print function call stack time complexity log linear quick step"
).split()


class Fault(BaseModel):
    """One injected failure: `kind` and its numeric argument (seconds or a token count)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["slow_first_token", "stall", "http500", "malformed", "drop", "exit"]
    arg: float = 0.0


def parse_fault(text: str) -> Fault:
    """`KIND[=ARG]`, e.g. `stall=20`, `slow_first_token=1.5`, `http500`; ValueError on anything else."""
    kind, _, arg = text.strip().partition("=")
    kind = kind.strip().replace("-", "_")
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault {kind!r} (known: {', '.join(FAULT_KINDS)})")
    try:
        value = float(arg) if arg.strip() else 0.0
    except ValueError:
        raise ValueError(f"fault {kind!r} needs a number, got {arg!r}") from None
    if value < 0:
        raise ValueError(f"fault {kind!r} needs a number >= 0")
    return Fault(kind=kind, arg=value)  # type: ignore[arg-type]


def parse_faults(spec: str | list[str] | None) -> list[Fault]:
    """Comma-separated (header) or listed (CLI) fault specs."""
    if not spec:
        return []
    items = spec.split(",") if isinstance(spec, str) else [p for s in spec for p in s.split(",")]
    return [parse_fault(s) for s in items if s.strip()]


class SimConfig(BaseModel):
    """What `ddtree-tui sim` takes on its command line; port 0 picks a free port."""

    algorithm: Literal["dflash", "ddtree", "baseline"] = "dflash"
    mode: Literal["linear", "shadow-linear", "tree"] | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    accept_length: float | None = Field(default=None, ge=1, le=64)
    decode_rate: float = Field(default=40.0, gt=0, le=1_000_000, description="verify passes per second")
    load_time: float = Field(default=0.0, ge=0)
    seed: int = 0
    model_path: str = "sim/Qwen3.6-35B-A3B"
    incremental_streaming_output: bool = False
    decode_log_interval: int = Field(default=40, ge=1)
    block_size: int = Field(default=16, ge=2, le=256, description="max tokens one verify pass can emit")
    faults: list[str] = Field(default_factory=list)
    exit_process: bool = False  # the exit fault ends the process (CLI) or only this server (in-process)
    # --- behaviours of the real server; off (0/False) is the fast, idealised simulator the tests mostly use
    health_latency: float = Field(default=0.0, ge=0, le=60, description="seconds /health takes (real: ~1)")
    prefill_rate: float = Field(default=0.0, ge=0, description="prompt tokens/s for TTFT; 0: no prefill time")
    batch_slowdown: bool = False  # step time grows with the running batch (BATCH_GROWTH_*)
    kv_capacity: int = Field(default=0, ge=0, description="KV tokens; beyond it a request aborts (503)")
    # SGLang's --max-running-requests: more requests than this wait in the scheduler's queue (their TTFT
    # grows, throughput stops growing: the knee a concurrency ladder finds); 0 = no cap
    max_running_requests: int = Field(default=0, ge=0, le=100000)
    # --- injectable drift, for soak tests (times count from the first generation request): after
    # `slowdown_after` seconds every decode step takes `slowdown_factor` times as long; after
    # `mem_creep_after` seconds the simulated GPU memory (GET /sim/gpu) grows by `mem_creep_mib_s` MiB/s
    slowdown_after: float = Field(default=0.0, ge=0)
    slowdown_factor: float = Field(default=1.0, ge=1.0, le=100.0)
    mem_creep_after: float = Field(default=0.0, ge=0)
    mem_creep_mib_s: float = Field(default=0.0, ge=0, le=100000)
    gpu_memory_mib: float = Field(default=40000.0, ge=0)  # the simulated GPU's memory in use at rest
    context_length: int = Field(default=CONTEXT_LENGTH, ge=16)
    old_meta_names: bool = False  # spec_accept_token_num / spec_draft_token_num (releases before 0.5.16)
    # OpenAI chat/completions: how servers other than SGLang (e.g. `transformers serve`) differ
    reasoning: bool = False  # chat: the first REASONING_SHARE of the tokens as delta.reasoning_content
    usage_on_finish: bool = False  # usage on the finish_reason chunk, whatever stream_options says
    no_done: bool = False  # the OpenAI streams end after the finish chunk without data: [DONE]
    detail_errors: bool = False  # errors as FastAPI's {"detail": ...} instead of {"error": {...}}
    strict_openai: bool = False  # 422 for unknown fields (ignore_eos), 400 for a model it does not serve
    # DDTree: with a budget the accept length and step time follow the DDTREE_* model above
    budget: int | None = Field(default=None, ge=1, le=4096, description="--speculative-ddtree-budget")
    max_topk: int | None = Field(default=None, ge=1, le=64, description="SGLANG_DDTREE_MAX_TOPK")
    hybrid: bool = False  # the simulated target is a hybrid GDN/Mamba model (Qwen3.5/3.6, Qwen3-Next)
    allow_hybrid_unsafe: bool = False

    @classmethod
    def realistic(cls, **kw: Any) -> SimConfig:
        """The SGLang 0.5.23 behaviours that an idealised simulator hides, all on (the demo's default)."""
        base: dict[str, Any] = {
            "health_latency": REAL_HEALTH_LATENCY_S,
            "prefill_rate": REAL_PREFILL_TOKENS_PER_S,
            "batch_slowdown": True,
        }
        return cls(**{**base, **kw})

    @classmethod
    def transformers_like(cls, **kw: Any) -> SimConfig:
        """An OpenAI-compatible server that is not SGLang, as `transformers serve` behaved in issue 13."""
        base: dict[str, Any] = {
            "usage_on_finish": True,
            "no_done": True,
            "detail_errors": True,
            "strict_openai": True,
        }
        return cls(**{**base, **kw})

    @property
    def linear_accept_length(self) -> float:
        return self.accept_length if self.accept_length is not None else DEFAULT_ACCEPT_LENGTH

    @property
    def ddtree_modelled(self) -> bool:
        """The DDTree model applies: a DDTree service given a budget."""
        return self.algorithm == "ddtree" and self.budget is not None

    @property
    def topk(self) -> int:
        return self.max_topk or DDTREE_DEFAULT_TOPK

    @property
    def effective_accept_length(self) -> float:
        if self.algorithm == "baseline":
            return 1.0
        if self.ddtree_modelled and self.display_mode == "tree":
            return ddtree_accept_length(self.linear_accept_length, int(self.budget or 1), self.topk)
        return self.linear_accept_length

    def startup_error(self) -> str | None:
        """Why this server refuses to start (as the patched build does), or None."""
        if (
            self.algorithm == "ddtree"
            and self.mode == "tree"
            and self.hybrid
            and not self.allow_hybrid_unsafe
        ):
            return HYBRID_TREE_REFUSAL
        return None

    @property
    def speculative_algorithm(self) -> str | None:
        return {"dflash": "DFLASH", "ddtree": "DDTREE"}.get(self.algorithm)

    @property
    def display_mode(self) -> str | None:
        if self.algorithm == "ddtree":
            return self.mode or "shadow-linear"
        return "linear" if self.algorithm == "dflash" else None

    def schedule(self, prompt: str, max_new_tokens: int) -> list[int]:
        """Tokens of each chunk. With a prefill model the prefill itself yields the first chunk, one token
        (as on the real server), and the verify passes bring the rest."""
        if self.prefill_rate > 0 and max_new_tokens > 0:
            return [
                1,
                *schedule(
                    self.seed,
                    prompt,
                    max_new_tokens - 1,
                    self.effective_accept_length,
                    self.block_size,
                    self.algorithm,
                ),
            ]
        return schedule(
            self.seed, prompt, max_new_tokens, self.effective_accept_length, self.block_size, self.algorithm
        )

    def step_seconds(self, running: int) -> float:
        """One decode (verify) step with `running` requests in the batch."""
        base = 1.0 / self.decode_rate
        if not self.batch_slowdown or running <= 1:
            return base * self.ddtree_cost(running)
        g = BATCH_GROWTH_BASELINE if self.algorithm == "baseline" else BATCH_GROWTH_SPEC
        return base * (1 + g * (running - 1)) * self.ddtree_cost(running)

    def ddtree_cost(self, running: int) -> float:
        """How much longer one step takes for the DDTree tree (1.0 without the DDTree model)."""
        if not self.ddtree_modelled:
            return 1.0
        return ddtree_step_factor(
            int(self.budget or 1), self.topk, max(1, running), self.display_mode == "tree"
        )


def ddtree_accept_length(linear: float, budget: int, topk: int) -> float:
    """The mean tokens a tree-verify pass emits (see the DDTREE_* constants)."""
    gain = 1 + DDTREE_TOPK_GAIN * (1 - 2.0 ** -(topk - 1))
    return 1 + (linear - 1) * gain * (1 - math.exp(-budget / (DDTREE_BUDGET_SCALE * topk)))


def ddtree_step_factor(budget: int, topk: int, running: int = 1, tree: bool = True) -> float:
    """Step time of a DDTree pass relative to a linear DFlash pass at the same batch."""
    if not tree:  # shadow-linear: the drafter builds the tree, the target verifies only the chain
        return 1 + DDTREE_SHADOW_NODE_COST * budget
    grow = 1 + DDTREE_NODE_COST * budget * (1 + DDTREE_NODE_BATCH_COST * (running - 1))
    return grow * (1 + DDTREE_TOPK_COST * (topk - 1))


def ddtree_expected_speed(linear: float, budget: int, topk: int, running: int = 1) -> float:
    """Tokens per linear-step time in tree mode: what the sim was built to make best (relative units)."""
    return ddtree_accept_length(linear, budget, topk) / ddtree_step_factor(budget, topk, running)


def _rng(seed: int, prompt: str, salt: str) -> random.Random:
    h = hashlib.sha256(f"{seed}\x00{salt}\x00{prompt}".encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


def schedule(
    seed: int,
    prompt: str,
    max_new_tokens: int,
    accept_length: float = DEFAULT_ACCEPT_LENGTH,
    block_size: int = 16,
    algorithm: str = "dflash",
) -> list[int]:
    """Tokens emitted by each verify pass of one request: the ground truth the tests compare against.

    k = 1 + Binomial(block_size - 1, (accept_length - 1) / (block_size - 1)), so k >= 1 and E[k] is the
    accept length; the last pass is cut so the sum is exactly max_new_tokens. Baseline: k = 1 always.
    """
    n = max(0, int(max_new_tokens))
    if n == 0:
        return []
    if algorithm == "baseline" or accept_length <= 1.0:
        return [1] * n
    rng = _rng(seed, prompt, "accept")
    trials = block_size - 1
    p = min(1.0, (accept_length - 1.0) / trials)
    out: list[int] = []
    left = n
    while left > 0:
        k = 1 + sum(1 for _ in range(trials) if rng.random() < p)
        k = min(k, left)
        out.append(k)
        left -= k
    return out


def approx_tokens(text: str) -> int:
    """A stable token count for prompts (about four characters a token)."""
    return max(1, math.ceil(len(text) / 4))


def token_texts(seed: int, prompt: str, n: int) -> list[str]:
    """Deterministic fake output text, one string per token."""
    rng = _rng(seed, prompt, "text")
    out = []
    for i in range(n):
        w = rng.choice(_WORDS)
        out.append(("\n" if i and i % 23 == 0 else " ") + w)
    return out


def _log_prefix() -> str:
    """configure_logger's format in 0.5.23: `[%(asctime)s{ms}{prefix}] ` with the year, rank tag TP0."""
    return time.strftime("[%Y-%m-%d %H:%M:%S TP0] ")


class _Hist:
    """A Prometheus histogram kept by hand (no extra dependency)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.sum += v
        self.count += 1
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1

    def render(self, name: str, labels: str) -> list[str]:
        lines = [f"# TYPE {name} histogram"]
        for b, c in zip(self.buckets, self.counts, strict=True):
            lines.append(f'{name}_bucket{{{labels},le="{b}"}} {c}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        lines.append(f"{name}_sum{{{labels}}} {self.sum}")
        lines.append(f"{name}_count{{{labels}}} {self.count}")
        return lines


class SimStats:
    """Server-lifetime counters, for /metrics, /server_info and the decode log lines."""

    def __init__(self) -> None:
        self.running = 0
        self.running_tokens = 0
        self.aborted_total = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.verify_total = 0
        self.accepted_total = 0  # tokens emitted by verify passes (spec accept length numerator)
        self.passes_since_log = 0
        self.tokens_since_log = 0
        self.window_start = time.monotonic()
        self.last_gen_throughput = 0.0
        self.last_accept_length = 0.0
        self.last_accept_rate = 0.0
        self.cache_hit_tokens = 0
        self.ttft = _Hist((0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.itl = _Hist((0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1))
        self.e2e = _Hist((0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))


class SimServer:
    """One simulated SGLang server, in this process: `async with SimServer(cfg) as s: s.base_url`."""

    def __init__(self, cfg: SimConfig | None = None, log: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg or SimConfig()
        self.faults = parse_faults(self.cfg.faults)
        self.stats = SimStats()
        self._log_sink = log
        self._runner: web.AppRunner | None = None
        self._started = 0.0
        self._shutting_down = False
        self._cache: list[str] = []
        self.port: int = self.cfg.port
        self.exited = asyncio.Event()  # set when the exit fault fired (in-process mode)
        self._active: set[asyncio.Task[Any]] = set()  # generation handlers, cancelled on stop
        self._slots: asyncio.Semaphore | None = None  # max_running_requests (made on the serving loop)
        self._first_request: float | None = None  # monotonic time of the first generation (drift clock)

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
        self._shutting_down = True
        me = asyncio.current_task()
        for t in list(self._active):
            if t is not me:
                t.cancel()
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
        )

    def log(self, msg: str) -> None:
        line = _log_prefix() + msg
        if self._log_sink is not None:
            self._log_sink(line)
        else:
            print(line, file=sys.stderr, flush=True)

    @property
    def loading(self) -> bool:
        return time.monotonic() - self._started < self.cfg.load_time

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
            await asyncio.sleep(self.cfg.health_latency)
            if self._shutting_down:
                return web.Response(status=503)
        return web.Response(status=200)

    def drift_clock(self) -> float:
        """Seconds since the first generation request (0 before it)."""
        return 0.0 if self._first_request is None else time.monotonic() - self._first_request

    def slowdown(self) -> float:
        c = self.cfg
        if (
            c.slowdown_factor > 1.0
            and self._first_request is not None
            and self.drift_clock() >= c.slowdown_after
        ):
            return c.slowdown_factor
        return 1.0

    def gpu_memory_mib(self) -> float:
        c = self.cfg
        creep = (
            max(0.0, self.drift_clock() - c.mem_creep_after) * c.mem_creep_mib_s if c.mem_creep_mib_s else 0.0
        )
        return c.gpu_memory_mib + creep

    async def _sim_gpu(self, request: web.Request) -> web.Response:
        """The simulator's modelled GPU (a simulator-only endpoint, labelled so): memory with any creep."""
        return web.json_response(
            {
                "simulated": True,
                "gpus": [
                    {
                        "index": 0,
                        "memory_used_mib": round(self.gpu_memory_mib(), 1),
                        "utilization_pct": 90.0 if self.stats.running else 0.0,
                        "power_w": 450.0 if self.stats.running else 90.0,
                        "temperature_c": 60.0,
                    }
                ],
            }
        )

    def server_info(self) -> dict[str, Any]:
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
            "enable_metrics": True,
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
                "decode_rate": c.decode_rate,
                "budget": c.budget,
                "max_topk": c.max_topk,
                "hybrid": c.hybrid,
                "seed": c.seed,
                "faults": [f.model_dump() for f in self.faults],
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
        self._cache.clear()
        return web.Response(text="Cache flushed.\nPlease check backend logs for more details.\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        s = self.stats
        labels = f'model_name="{self.cfg.model_path}",tp_rank="0"'
        usage = min(1.0, s.running_tokens / 1_000_000)
        hit = s.cache_hit_tokens / s.prompt_tokens_total if s.prompt_tokens_total else 0.0
        lines: list[str] = []

        def gauge(name: str, value: float, help_: str) -> None:
            lines.extend([f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {value}"])

        def counter(name: str, value: float, help_: str) -> None:
            lines.extend(
                [f"# HELP {name} {help_}", f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value)}"]
            )

        gauge("sglang:num_running_reqs", s.running, "The number of running requests.")
        gauge("sglang:num_queue_reqs", 0, "The number of requests in the waiting queue.")
        gauge("sglang:token_usage", round(usage, 6), "The token usage.")
        gauge(
            "sglang:gen_throughput", round(s.last_gen_throughput, 3), "The generation throughput (token/s)."
        )
        gauge("sglang:cache_hit_rate", round(hit, 6), "The prefix cache hit rate.")
        if self.cfg.speculative_algorithm:
            gauge(
                "sglang:spec_accept_length", round(s.last_accept_length, 4), "The average acceptance length."
            )
            gauge("sglang:spec_accept_rate", round(s.last_accept_rate, 4), "The average acceptance rate.")
        counter("sglang:prompt_tokens_total", s.prompt_tokens_total, "Number of prefill tokens processed.")
        counter("sglang:generation_tokens_total", s.generation_tokens_total, "Number of generation tokens.")
        counter("sglang:num_requests_total", s.requests_total, "Number of requests processed.")
        lines += s.ttft.render("sglang:time_to_first_token_seconds", labels)
        lines += s.itl.render("sglang:inter_token_latency_seconds", labels)
        lines += s.e2e.render("sglang:e2e_request_latency_seconds", labels)
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    # --- the generation engine -----------------------------------------------------------------------
    def _request_faults(self, request: web.Request, body: dict[str, Any]) -> list[Fault]:
        faults = list(self.faults)
        faults += parse_faults(request.headers.get(FAULT_HEADER))
        sp = body.get("sampling_params")
        for src in (body.get("sim_fault"), sp.get("sim_fault") if isinstance(sp, dict) else None):
            if isinstance(src, str | list):
                faults += parse_faults(src)
        return faults

    def _cached_tokens(self, prompt: str) -> int:
        """The radix cache's hit: the longest prefix shared with any earlier prompt (whole pages of
        CACHE_PAGE_CHARS characters), as SGLang's RadixAttention reuses a shared system prompt too."""
        best = 0
        for p in self._cache:
            if len(p) <= best:
                continue
            n = _common_prefix_len(prompt, p)
            n = n if n == len(p) else n - n % CACHE_PAGE_CHARS
            best = max(best, n)
        if prompt not in self._cache:
            self._cache.append(prompt)
            del self._cache[:-256]
        return approx_tokens(prompt[:best]) if best else 0

    async def _generation(
        self, prompt: str, max_new_tokens: int, faults: list[Fault], emit: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        """One request; with `max_running_requests` it first waits for a running slot (the waiting queue)."""
        if not self.cfg.max_running_requests:
            return await self._generation_run(prompt, max_new_tokens, faults, emit)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.cfg.max_running_requests)
        async with self._slots:
            return await self._generation_run(prompt, max_new_tokens, faults, emit)

    async def _generation_run(
        self, prompt: str, max_new_tokens: int, faults: list[Fault], emit: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        """Run one request's schedule, calling `emit(event)` per chunk; returns the final stats.

        Pacing is by absolute deadlines (each step's end = the previous end + the step time) so sleep overshoot
        never accumulates. With `prefill_rate` the first chunk (one token) comes after the prompt's prefill;
        with `batch_slowdown` a step takes longer the more requests run; with `kv_capacity` a request whose
        next tokens do not fit aborts with SGLang's retraction message (status 503).
        """
        cfg = self.cfg
        if self._first_request is None:
            self._first_request = time.monotonic()
        sched = cfg.schedule(prompt, max_new_tokens)
        texts = token_texts(cfg.seed, prompt, sum(sched))
        prompt_tokens = approx_tokens(prompt)
        cached = self._cached_tokens(prompt)
        st = self.stats
        st.requests_total += 1
        st.prompt_tokens_total += prompt_tokens
        st.cache_hit_tokens += cached
        self._log_prefill(1, prompt_tokens - cached, cached, st.running_tokens + prompt_tokens)
        fmap = {f.kind: f.arg for f in faults}
        rid = uuid.uuid4().hex
        t0 = time.monotonic()
        delay = fmap.get("slow_first_token", 0.0)
        if cfg.prefill_rate > 0:
            delay += (prompt_tokens - cached) / cfg.prefill_rate
        st.running += 1
        st.running_tokens += prompt_tokens
        done = 0
        last_t = t0
        deadline = t0 + delay
        prefill_pass = cfg.prefill_rate > 0
        verify = 0
        base = {"id": rid, "prompt_tokens": prompt_tokens, "cached_tokens": cached}
        try:
            for i, k in enumerate(sched):
                if "stall" in fmap and done >= fmap["stall"]:
                    await asyncio.Event().wait()  # hang until the client or the server gives up
                if "drop" in fmap and done >= fmap["drop"]:
                    raise _Drop()
                if "exit" in fmap and done >= fmap["exit"]:
                    self._exit_now()
                    raise _Drop()
                deadline += cfg.step_seconds(st.running) * self.slowdown()
                wait = deadline - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                now = time.monotonic()
                if cfg.kv_capacity and st.running_tokens + k > cfg.kv_capacity:
                    self.log(f"retract_decode: aborted request {rid}: {RETRACT_ABORT_MESSAGE}")
                    st.aborted_total += 1
                    await emit(
                        {
                            **base,
                            "delta": "",
                            "cumulative": "".join(texts[:done]),
                            "ids_delta": [],
                            "completion_tokens": done,
                            "last": True,
                            "abort": {"message": RETRACT_ABORT_MESSAGE, "status_code": 503},
                            "verify_ct": verify,
                            "e2e_latency": now - t0,
                        }
                    )
                    return {"id": rid, "completion_tokens": done, "prompt_tokens": prompt_tokens}
                if i == 0:
                    st.ttft.observe(now - t0)
                else:
                    st.itl.observe((now - last_t) / k)
                last_t = now
                prev = done
                done += k
                st.running_tokens += k
                st.generation_tokens_total += k
                if not (prefill_pass and i == 0):
                    verify += 1
                    st.verify_total += 1
                    st.accepted_total += k
                    self._count_pass(k)
                last = i == len(sched) - 1
                ev: dict[str, Any] = {
                    **base,
                    "delta": "".join(texts[prev:done]),
                    "cumulative": "".join(texts[:done]),
                    "ids_delta": [hash(t) % 150000 for t in texts[prev:done]],
                    "completion_tokens": done,
                    "last": last,
                    "verify_ct": verify,
                }
                if last:
                    ev["e2e_latency"] = now - t0
                await emit(ev)
                if i == 0 and "malformed" in fmap:
                    await emit({"malformed": True})
            if not sched:
                await emit(
                    {
                        **base,
                        "delta": "",
                        "cumulative": "",
                        "ids_delta": [],
                        "completion_tokens": 0,
                        "last": True,
                        "verify_ct": 0,
                        "e2e_latency": time.monotonic() - t0,
                    }
                )
        finally:
            st.running -= 1
            st.running_tokens -= prompt_tokens + done
            st.e2e.observe(time.monotonic() - t0)
        return {"id": rid, "completion_tokens": done, "prompt_tokens": prompt_tokens}

    def _log_prefill(self, seqs: int, new: int, cached: int, used: int) -> None:
        st = self.stats
        cap = self.cfg.kv_capacity or 1_000_000
        self.log(
            f"Prefill batch, #new-seq: {seqs}, #new-token: {new}, #cached-token: {cached}, "
            f"token usage: {min(1.0, used / cap):.2f}, #running-req: {st.running}, #queue-req: 0, "
            f"#pending-token: 0, cuda graph: False, input throughput (token/s): "
            f"{self.cfg.prefill_rate or 0.0:.2f}"
        )

    def _count_pass(self, k: int) -> None:
        st = self.stats
        st.passes_since_log += 1
        st.tokens_since_log += k
        if st.passes_since_log < self.cfg.decode_log_interval:
            return
        now = time.monotonic()
        elapsed = max(1e-9, now - st.window_start)
        acc_len = st.tokens_since_log / st.passes_since_log
        acc_rate = (acc_len - 1) / (self.cfg.block_size - 1)
        st.last_gen_throughput = st.tokens_since_log / elapsed
        st.last_accept_length, st.last_accept_rate = acc_len, acc_rate
        spec = (
            f"accept len: {acc_len:.2f}, accept rate: {acc_rate:.2f}, "
            if self.cfg.speculative_algorithm
            else ""
        )
        cap = self.cfg.kv_capacity or 1_000_000
        # 0.5.23's metrics_reporter.py decode line, ending in "#queue-req: N" without a trailing comma
        self.log(
            f"Decode batch, #running-req: {st.running}, #token: {st.running_tokens}, "
            f"token usage: {min(1.0, st.running_tokens / cap):.2f}, {spec}cuda graph: True, "
            f"gen throughput (token/s): {st.last_gen_throughput:.2f}, #queue-req: 0"
        )
        st.passes_since_log = 0
        st.tokens_since_log = 0
        st.window_start = now

    def _exit_now(self) -> None:
        self.log("Simulated fault: process exit")
        if self.cfg.exit_process:
            sys.stderr.flush()
            os._exit(3)
        self.exited.set()
        self._shutting_down = True
        if self._runner is not None:
            asyncio.get_running_loop().create_task(self.stop())

    def _spec_final(self, completion_tokens: int, verify_ct: int) -> dict[str, Any]:
        """The spec keys of the final meta_info, as 0.5.23's tokenizer_manager writes them (only when
        verify_ct > 0): accept rate = correct / proposed, proposed = verify_ct * (num_draft_tokens - 1)."""
        if not self.cfg.speculative_algorithm or not verify_ct:
            return {}
        correct = max(0, completion_tokens - verify_ct - (1 if self.cfg.prefill_rate > 0 else 0))
        proposed = verify_ct * (self.cfg.block_size - 1)
        if self.cfg.old_meta_names:
            return {
                "spec_verify_ct": verify_ct,
                "spec_accept_length": completion_tokens / verify_ct,
                "spec_accept_rate": correct / proposed,
                "spec_accept_token_num": correct,
                "spec_draft_token_num": proposed,
            }
        return {
            "spec_accept_rate": correct / proposed,
            "spec_accept_length": completion_tokens / verify_ct,
            "spec_num_correct_drafts": correct,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": verify_ct,
        }

    def _error(self, status: int, message: str) -> web.Response:
        """SGLang's error object, or FastAPI's {"detail": ...} as other servers send (`detail_errors`)."""
        if self.cfg.detail_errors:
            return web.json_response({"detail": message}, status=status)
        return _error(status, message)

    async def _read_body(self, request: web.Request) -> dict[str, Any] | web.Response:
        if self.loading or self._shutting_down:
            return self._error(503, "The server is not ready (loading).")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._error(400, "request body is not JSON")
        if not isinstance(body, dict):
            return self._error(400, "request body must be a JSON object")
        return body

    def _too_long(self, prompt: str, max_new: int) -> str | None:
        """tokenizer_manager.py's refusal of prompt + max_new_tokens beyond the context length."""
        n = approx_tokens(prompt)
        if n >= self.cfg.context_length:
            return f"The input ({n} tokens) is longer than the model's context length ({self.cfg.context_length} tokens)."
        if max_new < 0:
            return "max_new_tokens must be at least 0"
        if n + max_new > self.cfg.context_length:
            return (
                f"Requested token count exceeds the model's maximum context length of {self.cfg.context_length} "
                f"tokens. You requested a total of {n + max_new} tokens: {n} tokens from the input messages and "
                f"{max_new} tokens for the completion. Please reduce the number of tokens in the input messages "
                "or the completion to fit within the limit."
            )
        return None

    async def _stream(
        self,
        request: web.Request,
        prompt: str,
        max_new: int,
        faults: list[Fault],
        render: Callable[[dict[str, Any]], list[dict[str, Any] | str]],
        stream: bool,
        final: Callable[[list[dict[str, Any]]], dict[str, Any]],
        *,
        done_line: bool = True,
        in_stream_error: bool = False,
    ) -> web.StreamResponse:
        """The shared SSE (or single JSON) plumbing of the three generation endpoints. `render` returns the
        chunk objects (or raw `data:` payload strings) of one event."""
        if any(f.kind == "http500" for f in faults):
            return self._error(500, "Simulated internal server error")
        too_long = self._too_long(prompt, max_new)
        if too_long and not (stream and in_stream_error):
            return self._error(400, too_long)
        task = asyncio.current_task()
        if task is not None:
            self._active.add(task)
            task.add_done_callback(self._active.discard)
        events: list[dict[str, Any]] = []
        if not stream:

            async def collect(ev: dict[str, Any]) -> None:
                if not ev.get("malformed"):
                    events.append(ev)

            try:
                await self._generation(prompt, max_new, faults, collect)
            except _Drop:
                _abort(request)
                raise web.HTTPInternalServerError() from None
            return web.json_response(final(events))

        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        if too_long:
            # /generate: a ValueError inside stream_results becomes an error chunk, then [DONE] (HTTP 200)
            err = {
                "error": {
                    "message": too_long,
                    "type": "invalid_request_error",
                    "code": 400,
                    "retryable": False,
                }
            }
            with contextlib.suppress(ConnectionResetError, ConnectionError):
                await resp.write(b"data: " + json.dumps(err).encode() + b"\n\n")
                await resp.write(b"data: [DONE]\n\n")
                await resp.write_eof()
            return resp

        async def emit(ev: dict[str, Any]) -> None:
            if ev.get("malformed"):
                await resp.write(b'data: {"text": "this chunk is not json\n\n')
                return
            for obj in render(ev):
                payload = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
                await resp.write(b"data: " + payload.encode() + b"\n\n")

        try:
            await self._generation(prompt, max_new, faults, emit)
        except _Drop:
            _abort(request)
            return resp
        except (ConnectionResetError, ConnectionError):
            return resp
        with contextlib.suppress(ConnectionResetError, ConnectionError):
            if done_line:
                await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        return resp

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_body(request)
        if isinstance(body, web.Response):
            return body
        text = body.get("text")
        if text is None and body.get("input_ids") is not None:
            text = " ".join(str(i) for i in body["input_ids"])
        if isinstance(text, list):
            text = text[0] if text else ""
        if not isinstance(text, str):
            return self._error(400, "either 'text' or 'input_ids' is required")
        sp = body.get("sampling_params") or {}
        try:
            max_new = int(sp.get("max_new_tokens", 128))
        except (TypeError, ValueError):
            return self._error(400, "max_new_tokens must be an integer")
        try:
            faults = self._request_faults(request, body)
        except ValueError as e:
            return self._error(400, str(e))
        incremental = self.cfg.incremental_streaming_output

        def meta(ev: dict[str, Any]) -> dict[str, Any]:
            # key order and names of 0.5.23's tokenizer_manager._handle_batch_output
            fr: dict[str, Any] | None = None
            if ev.get("abort"):
                fr = {
                    "type": "abort",
                    "message": ev["abort"]["message"],
                    "status_code": ev["abort"]["status_code"],
                    "err_type": None,
                }
            elif ev["last"]:
                fr = {"type": "length", "length": max_new}
            m: dict[str, Any] = {
                "id": ev["id"],
                "finish_reason": fr,
                "prompt_tokens": ev["prompt_tokens"],
                "weight_version": "default",
                "num_retractions": 0,
                "reasoning_tokens": 0,
                "completion_tokens": ev["completion_tokens"],
                "cached_tokens": ev["cached_tokens"],
            }
            if ev["last"]:
                m["e2e_latency"] = ev["e2e_latency"]
                m.update(self._spec_final(ev["completion_tokens"], ev["verify_ct"]))
            return m

        ids: list[int] = []

        def render(ev: dict[str, Any]) -> list[dict[str, Any] | str]:
            ids.extend(ev["ids_delta"])
            return [
                {
                    "text": ev["delta"] if incremental else ev["cumulative"],
                    "output_ids": ev["ids_delta"] if incremental else list(ids),
                    "meta_info": meta(ev),
                }
            ]

        def final(events: list[dict[str, Any]]) -> dict[str, Any]:
            last = events[-1]
            return {
                "text": last["cumulative"],
                "output_ids": [i for e in events for i in e["ids_delta"]],
                "meta_info": meta(last),
            }

        return await self._stream(
            request, text, max_new, faults, render, bool(body.get("stream")), final, in_stream_error=True
        )

    async def _openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        body = await self._read_body(request)
        if isinstance(body, web.Response):
            return body
        cfg = self.cfg
        if cfg.strict_openai:
            unknown = sorted(set(body) - _OPENAI_FIELDS)
            if unknown:
                return web.json_response(
                    {
                        "detail": [
                            {
                                "type": "extra_forbidden",
                                "loc": ["body", k],
                                "msg": "Extra inputs are not permitted",
                                "input": body[k],
                            }
                            for k in unknown
                        ]
                    },
                    status=422,
                )
            if body.get("model") not in (None, cfg.model_path):
                return self._error(
                    400, f"Server is pinned to model {cfg.model_path}; got {body.get('model')!r}"
                )
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                return self._error(400, "'messages' is required")
            prompt = "".join(
                f"<|im_start|>{m.get('role', 'user')}\n{_content(m.get('content'))}<|im_end|>\n"
                for m in msgs
                if isinstance(m, dict)
            )
            prompt += "<|im_start|>assistant\n"
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list):
                prompt = prompt[0] if prompt else ""
            if not isinstance(prompt, str):
                return self._error(400, "'prompt' is required")
        try:
            max_new = int(body.get("max_completion_tokens") or body.get("max_tokens") or 128)
        except (TypeError, ValueError):
            return self._error(400, "max_tokens must be an integer")
        try:
            faults = self._request_faults(request, body)
        except ValueError as e:
            return self._error(400, str(e))
        usage_wanted = bool((body.get("stream_options") or {}).get("include_usage"))
        model = body.get("model") or cfg.model_path
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        sglang_style = not (cfg.usage_on_finish or cfg.strict_openai)
        reasoning_until = [0]
        first = [True]

        def chunk(
            choices: list[dict[str, Any]], rid: str, usage: dict[str, Any] | None = None
        ) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model,
                "choices": choices,
            }
            if usage is not None:
                out["usage"] = usage
            return out

        def delta(
            content: str | None = None, reasoning: str | None = None, role: str | None = None
        ) -> dict[str, Any]:
            if not sglang_style:
                d: dict[str, Any] = {}
                if role:
                    d["role"] = role
                if content is not None:
                    d["content"] = content
                if reasoning is not None:
                    d["reasoning_content"] = reasoning
                return d
            # sse_utils.StreamDelta: reasoning_content always there (null or text), the rest when set
            d = {"reasoning_content": reasoning}
            if role:
                d["role"] = role
            if content is not None:
                d["content"] = content
            return d

        def usage(ev: dict[str, Any]) -> dict[str, Any]:
            u = {
                "prompt_tokens": ev["prompt_tokens"],
                "total_tokens": ev["prompt_tokens"] + ev["completion_tokens"],
                "completion_tokens": ev["completion_tokens"],
                "prompt_tokens_details": {"cached_tokens": ev["cached_tokens"]},
            }
            if sglang_style:
                u["reasoning_tokens"] = min(ev["completion_tokens"], reasoning_until[0])
            return u

        def render(ev: dict[str, Any]) -> list[dict[str, Any] | str]:
            rid = ev["id"]
            out: list[dict[str, Any] | str] = []
            if first[0] and chat:
                first[0] = False
                if cfg.reasoning:
                    total = max_new
                    reasoning_until[0] = int(total * REASONING_SHARE)
                out.append(
                    chunk(
                        [
                            {
                                "index": 0,
                                "delta": delta(content="", role="assistant"),
                                "logprobs": None,
                                "finish_reason": None,
                            }
                        ],
                        rid,
                    )
                )
            if ev.get("abort"):
                ab = ev["abort"]
                # serving_chat.py: an abort with a status code becomes a streaming error response
                out.append(
                    json.dumps(
                        {
                            "error": {
                                "object": "error",
                                "message": ab["message"],
                                "type": "SERVICE_UNAVAILABLE",
                                "param": None,
                                "code": ab["status_code"],
                            }
                        }
                    )
                )
                if usage_wanted and sglang_style:
                    out.append(chunk([], rid, usage(ev)))
                return out
            text = ev["delta"]
            if text:
                if chat:
                    lo = ev["completion_tokens"] - len(ev["ids_delta"])
                    if lo < reasoning_until[0]:
                        out.append(
                            chunk(
                                [
                                    {
                                        "index": 0,
                                        "delta": delta(reasoning=text),
                                        "logprobs": None,
                                        "finish_reason": None,
                                    }
                                ],
                                rid,
                            )
                        )
                    else:
                        out.append(
                            chunk(
                                [
                                    {
                                        "index": 0,
                                        "delta": delta(content=text),
                                        "logprobs": None,
                                        "finish_reason": None,
                                    }
                                ],
                                rid,
                            )
                        )
                else:
                    out.append(
                        chunk([{"index": 0, "text": text, "logprobs": None, "finish_reason": None}], rid)
                    )
            if ev["last"]:
                fin: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length"}
                if chat:
                    fin["delta"] = delta()
                else:
                    fin["text"] = ""
                if sglang_style:
                    fin["matched_stop"] = None
                out.append(chunk([fin], rid, usage(ev) if cfg.usage_on_finish else None))
                if usage_wanted and not cfg.usage_on_finish:
                    out.append(chunk([], rid, usage(ev)))
            return out

        def final(events: list[dict[str, Any]]) -> dict[str, Any]:
            last = events[-1]
            if chat:
                ch: dict[str, Any] = {
                    "index": 0,
                    "message": {"role": "assistant", "content": last["cumulative"]},
                    "finish_reason": "length",
                }
            else:
                ch = {"index": 0, "text": last["cumulative"], "finish_reason": "length"}
            return {
                "id": last["id"],
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": model,
                "choices": [ch],
                "usage": usage(last),
            }

        return await self._stream(
            request,
            prompt,
            max_new,
            faults,
            render,
            bool(body.get("stream")),
            final,
            done_line=not cfg.no_done,
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=False)


# the request fields a strict OpenAI server knows (openai's ChatCompletion/Completion create parameters)
_OPENAI_FIELDS = frozenset(
    "model messages prompt max_tokens max_completion_tokens temperature top_p n stream stream_options stop "
    "presence_penalty frequency_penalty logit_bias logprobs top_logprobs user seed tools tool_choice "
    "response_format suffix echo best_of parallel_tool_calls".split()
)


def _common_prefix_len(a: str, b: str) -> int:
    """Characters a and b share at the start (binary search over slices: fast for long prompts)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Drop(Exception):
    """Close the connection without finishing the response."""


def _abort(request: web.Request) -> None:
    tr = request.transport
    if tr is not None:
        tr.abort()


def _content(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(str(p.get("text", "")) for p in c if isinstance(p, dict))
    return "" if c is None else str(c)


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "SimulatedError", "code": status}, "object": "error"},
        status=status,
    )


# --- command line ---------------------------------------------------------------------------------------


def config_from_namespace(ns: argparse.Namespace) -> SimConfig:
    real = bool(getattr(ns, "realistic", False))
    style = getattr(ns, "openai_style", None)

    def opt(name: str, real_value: Any, off: Any) -> Any:
        v = getattr(ns, name, None)
        return v if v is not None else (real_value if real else off)

    return SimConfig(
        health_latency=opt("health_latency", REAL_HEALTH_LATENCY_S, 0.0),
        prefill_rate=opt("prefill_rate", REAL_PREFILL_TOKENS_PER_S, 0.0),
        batch_slowdown=bool(getattr(ns, "batch_slowdown", False) or real),
        kv_capacity=getattr(ns, "kv_capacity", None) or 0,
        max_running_requests=getattr(ns, "max_running_requests", None) or 0,
        slowdown_after=getattr(ns, "slowdown_after", None) or 0.0,
        slowdown_factor=getattr(ns, "slowdown_factor", None) or 1.0,
        mem_creep_after=getattr(ns, "mem_creep_after", None) or 0.0,
        mem_creep_mib_s=getattr(ns, "mem_creep", None) or 0.0,
        reasoning=bool(getattr(ns, "reasoning", False)),
        usage_on_finish=bool(getattr(ns, "usage_on_finish", False) or style == "transformers"),
        no_done=bool(getattr(ns, "no_done", False) or style == "transformers"),
        detail_errors=bool(getattr(ns, "detail_errors", False) or style == "transformers"),
        strict_openai=bool(getattr(ns, "strict_openai", False) or style == "transformers"),
        algorithm=ns.algorithm,
        mode=getattr(ns, "sim_mode", None),
        host=ns.host,
        port=ns.port,
        accept_length=ns.accept_length,
        decode_rate=ns.decode_rate,
        load_time=ns.load_time,
        seed=ns.seed,
        model_path=ns.model_path,
        incremental_streaming_output=ns.incremental_streaming_output,
        decode_log_interval=ns.decode_log_interval,
        faults=list(ns.fault or []),
        exit_process=True,
        budget=getattr(ns, "budget", None),
        block_size=getattr(ns, "block_size", None) or 16,
        max_topk=_env_topk(),
        hybrid=bool(getattr(ns, "hybrid", False)),
        allow_hybrid_unsafe=bool(getattr(ns, "allow_hybrid_unsafe", False)),
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
        print(_log_prefix() + f"ValueError: {refusal}", file=sys.stderr, flush=True)
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


def cli_main(ns: argparse.Namespace) -> int:
    try:
        cfg = config_from_namespace(ns)
        parse_faults(cfg.faults)
    except ValueError as e:
        print(f"ddtree-tui sim: {e}", file=sys.stderr)
        return 2
    return asyncio.run(serve(cfg))

"""What a simulated server is (SimConfig, its faults) and the model it follows: the real server's constants,
each with its source, DDTree's accept-length and step-time model, and the seeded per-request schedule of
tokens per verify pass that the tests compare against.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from typing import Any, Literal

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
# SGLANG_DDTREE_DEPTH_BONUS (the open PR's env): a bias of the best-first expansion toward deeper nodes. With
# bonus d the budget reaches depth sooner (the saturation scale shrinks by 1 + d) but the width gain of top-k
# is taken to the power 1 / (1 + d): deeper, narrower trees (modelled; 0, the default, is the model above).
DDTREE_DEPTH_BONUS_DEFAULT = 0.0
# --- DFlash block size and draft window (modelled, each marked) ------------------------------------------
# `--speculative-num-draft-tokens` / `--speculative-dflash-block-size`: the drafter proposes a block of this
# many tokens in one pass and the target verifies them all. DFlash's released drafters are trained with block
# 16 (z-lab DFlash model cards), so the configured accept length is the one at block 16 and other sizes are
# scaled from it. accept(block) = 1 + (a16 - 1) * f(block) / f(16), f(x) = 1 - exp(-(x - 1) / SCALE): longer
# blocks accept more with diminishing returns (modelled; SCALE a choice).
DFLASH_BLOCK_REF = 16
DFLASH_BLOCK_SCALE = 6.0
# Verify cost of a block: each verified token costs TOKEN_COST of a step at batch 1, and TOKEN_BATCH_COST
# more per extra running request (the verify of batch x block tokens turns compute-bound: the reason the best
# block shrinks as concurrency grows). Relative to block 16, so the default block costs what it always did.
DFLASH_TOKEN_COST = 0.02  # (choice)
DFLASH_TOKEN_BATCH_COST = 0.08  # (choice)
# `--speculative-dflash-draft-window-size`: the drafter attends to the last W context tokens only (unset: the
# whole context). A window cuts the drafter's share of the step (DRAFT_SHARE, a choice) in proportion to
# W / WINDOW_FULL and costs acceptance: accept x (1 - WINDOW_LOSS * exp(-W / WINDOW_SCALE)) (modelled).
DFLASH_DRAFT_SHARE = 0.2
DFLASH_WINDOW_FULL = 4096
DFLASH_WINDOW_SCALE = 512.0
DFLASH_WINDOW_LOSS = 0.3
DDTREE_DEFAULT_TOPK = 4  # when SGLANG_DDTREE_MAX_TOPK is unset (a modelling choice; the PR's default varies)
HYBRID_TREE_REFUSAL = (
    "DDTree tree verify on a hybrid (GDN/Mamba) model is unsafe: the recurrent state cannot be forked per "
    "branch; use mode shadow-linear or set allow_hybrid_unsafe"
)

# Per-prompt acceptance (issue 26, modelled): a drafter matches some prompts better than others (code better
# than prose), so each prompt's mean accept length is the service's with (accept - 1) scaled by a factor drawn
# once per prompt text from U(1 - s, 1 + s), s = `accept_spread`. Seeded by the prompt alone: the same prompt
# is as easy on every service, so a comparison of services is not biased by it.
DEFAULT_ACCEPT_SPREAD = 0.25

# The environment variable `ddtree-tui sim` takes its time scale from (SimConfig.time_scale): tests set it so
# the simulators that a demo fleet or a headless run starts for them run fast; unset, time is real.
TIME_SCALE_ENV = "DDTREE_SIM_TIME_SCALE"

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


def env_time_scale(environ: Mapping[str, str]) -> float:
    """The time scale `environ` asks for (TIME_SCALE_ENV; unset or empty: 1); ValueError when it is not a
    number in (0, 10000]."""
    raw = (environ.get(TIME_SCALE_ENV) or "").strip()
    if not raw:
        return 1.0
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"{TIME_SCALE_ENV} must be a number, got {raw!r}") from None
    if not 0 < v <= 10000:
        raise ValueError(f"{TIME_SCALE_ENV} must be in (0, 10000], got {raw}")
    return v


# the presets of SimConfig.realistic() and SimConfig.transformers_like()
REALISTIC: dict[str, Any] = {
    "health_latency": REAL_HEALTH_LATENCY_S,
    "prefill_rate": REAL_PREFILL_TOKENS_PER_S,
    "batch_slowdown": True,
}
TRANSFORMERS_LIKE: dict[str, Any] = {
    "usage_on_finish": True,
    "no_done": True,
    "detail_errors": True,
    "strict_openai": True,
}


class SimConfig(BaseModel):
    """What `ddtree-tui sim` takes on its command line; port 0 picks a free port."""

    algorithm: Literal["dflash", "ddtree", "baseline"] = "dflash"
    mode: Literal["linear", "shadow-linear", "tree"] | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    accept_length: float | None = Field(default=None, ge=1, le=64)
    accept_spread: float = Field(default=DEFAULT_ACCEPT_SPREAD, ge=0, le=0.9)  # per-prompt, see the constant
    decode_rate: float = Field(default=40.0, gt=0, le=1_000_000, description="verify passes per second")
    load_time: float = Field(default=0.0, ge=0)
    seed: int = 0
    model_path: str = "sim/Qwen3.6-35B-A3B"
    incremental_streaming_output: bool = False
    decode_log_interval: int = Field(default=40, ge=1)
    block_size: int = Field(default=16, ge=2, le=256, description="max tokens one verify pass can emit")
    faults: list[str] = Field(default_factory=list)
    exit_process: bool = False  # the exit fault ends the process (CLI) or only this server (in-process)
    # Fast-forward for tests where real time is not the point: every modelled duration (decode steps, load
    # time, /health latency, prefill, slow_first_token, the drift clock) passes `time_scale` times faster, so
    # the server behaves as one whose rates are `time_scale` times higher. What it reports (e2e_latency, the
    # histograms, the log lines' throughput) is measured, so it stays in real seconds. 1: real time.
    time_scale: float = Field(default=1.0, gt=0, le=10000)
    # --- behaviours of the real server; off (0/False) is the fast, idealised simulator the tests mostly use
    health_latency: float = Field(default=0.0, ge=0, le=60, description="seconds /health takes (real: ~1)")
    prefill_rate: float = Field(default=0.0, ge=0, description="prompt tokens/s for TTFT; 0: no prefill time")
    batch_slowdown: bool = False  # step time grows with the running batch (BATCH_GROWTH_*)
    kv_capacity: int = Field(default=0, ge=0, description="KV tokens; beyond it a request aborts (503)")
    # SGLang's --max-running-requests: more requests than this wait in the scheduler's queue (their TTFT
    # grows, throughput stops growing: the knee a concurrency ladder finds); 0 = no cap
    max_running_requests: int = Field(default=0, ge=0, le=100000)
    # seconds a streaming request decodes on after its client went: SGLang 0.5.23's streaming response runs
    # the tokenizer manager's abort 2 s after the client disconnected (create_abort_task), and only if the
    # request is still there then (one that finished first is never counted as aborted); 0 = at once
    disconnect_abort_s: float = Field(default=0.0, ge=0, le=60, description="stream abort delay (real: 2)")
    # --- injectable drift, for soak tests (times count from the first generation request): after
    # `slowdown_after` seconds every decode step takes `slowdown_factor` times as long; after
    # `mem_creep_after` seconds the simulated GPU memory (GET /sim/gpu) grows by `mem_creep_mib_s` MiB/s
    slowdown_after: float = Field(default=0.0, ge=0)
    slowdown_factor: float = Field(default=1.0, ge=1.0, le=100.0)
    mem_creep_after: float = Field(default=0.0, ge=0)
    mem_creep_mib_s: float = Field(default=0.0, ge=0, le=100000)
    gpu_memory_mib: float = Field(default=40000.0, ge=0)  # the simulated GPU's memory in use at rest
    context_length: int = Field(default=CONTEXT_LENGTH, ge=16)
    enable_metrics: bool = (
        True  # SGLang's --enable-metrics: off, GET /metrics answers 404 (issue 26's fallback)
    )
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
    depth_bonus: float | None = Field(default=None, ge=0, le=16, description="SGLANG_DDTREE_DEPTH_BONUS")
    draft_window: int | None = Field(
        default=None, ge=1, le=1_048_576, description="--speculative-dflash-draft-window-size"
    )
    hybrid: bool = False  # the simulated target is a hybrid GDN/Mamba model (Qwen3.5/3.6, Qwen3-Next)
    allow_hybrid_unsafe: bool = False

    @classmethod
    def realistic(cls, **kw: object) -> SimConfig:
        """The SGLang 0.5.23 behaviours that an idealised simulator hides, all on (the demo's default)."""
        return cls(**{**REALISTIC, **kw})

    @classmethod
    def transformers_like(cls, **kw: object) -> SimConfig:
        """An OpenAI-compatible server that is not SGLang, as `transformers serve` behaved in issue 13."""
        return cls(**{**TRANSFORMERS_LIKE, **kw})

    def real_seconds(self, simulated: float) -> float:
        """How long `simulated` seconds of the model take on this server's clock (time_scale)."""
        return simulated / self.time_scale

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
    def chain_accept_length(self) -> float:
        """The linear chain's accept length at this block size and draft window (DFLASH_* model)."""
        return dflash_accept_length(self.linear_accept_length, self.block_size, self.draft_window)

    @property
    def effective_accept_length(self) -> float:
        if self.algorithm == "baseline":
            return 1.0
        if self.ddtree_modelled and self.display_mode == "tree":
            return ddtree_accept_length(
                self.chain_accept_length, int(self.budget or 1), self.topk, self.depth_bonus or 0.0
            )
        return self.chain_accept_length

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
        """config.display_mode's answer (the one every screen uses); None for no speculation (baseline)."""
        # imported here, and from model/modes, not ddtree_tui.config: the profile models are no part of a
        # simulator's start (issue 24)
        from ddtree_tui.model.modes import display_mode

        mode = display_mode(self.algorithm, self.mode)
        return None if mode == "-" else mode

    def prompt_accept_length(self, prompt: str) -> float:
        """This prompt's mean accept length: the service's, its excess over 1 scaled by the prompt's factor
        (DEFAULT_ACCEPT_SPREAD's comment), at most a whole block."""
        a = self.effective_accept_length
        if self.accept_spread <= 0 or a <= 1.0:
            return a
        f = 1 + self.accept_spread * (2 * _rng(0, prompt, "difficulty").random() - 1)
        return min(float(self.block_size), 1 + (a - 1) * f)

    def schedule(self, prompt: str, max_new_tokens: int) -> list[int]:
        """Tokens of each chunk. With a prefill model the prefill itself yields the first chunk, one token
        (as on the real server), and the verify passes bring the rest."""
        accept = self.prompt_accept_length(prompt)
        if self.prefill_rate > 0 and max_new_tokens > 0:
            return [
                1,
                *schedule(self.seed, prompt, max_new_tokens - 1, accept, self.block_size, self.algorithm),
            ]
        return schedule(self.seed, prompt, max_new_tokens, accept, self.block_size, self.algorithm)

    def step_seconds(self, running: int) -> float:
        """One decode (verify) step with `running` requests in the batch, in real seconds (time_scale)."""
        base = 1.0 / (self.decode_rate * self.time_scale)
        spec = self.dflash_cost(running)
        if not self.batch_slowdown or running <= 1:
            return base * self.ddtree_cost(running) * spec
        g = BATCH_GROWTH_BASELINE if self.algorithm == "baseline" else BATCH_GROWTH_SPEC
        return base * (1 + g * (running - 1)) * self.ddtree_cost(running) * spec

    def dflash_cost(self, running: int) -> float:
        """How much longer one step takes for this block size and draft window (1.0 at block 16, no window,
        and for the baseline)."""
        if self.algorithm == "baseline":
            return 1.0
        return dflash_step_factor(self.block_size, self.draft_window, max(1, running))

    def ddtree_cost(self, running: int) -> float:
        """How much longer one step takes for the DDTree tree (1.0 without the DDTree model)."""
        if not self.ddtree_modelled:
            return 1.0
        return ddtree_step_factor(
            int(self.budget or 1), self.topk, max(1, running), self.display_mode == "tree"
        )


def ddtree_accept_length(linear: float, budget: int, topk: int, depth_bonus: float = 0.0) -> float:
    """The mean tokens a tree-verify pass emits (see the DDTREE_* constants)."""
    gain = math.pow(1 + DDTREE_TOPK_GAIN * (1 - 2.0 ** -(topk - 1)), 1 / (1 + depth_bonus))
    scale = DDTREE_BUDGET_SCALE * topk / (1 + depth_bonus)
    return 1 + (linear - 1) * gain * (1 - math.exp(-budget / scale))


def _block_reach(block: int) -> float:
    return 1 - math.exp(-(max(1, block) - 1) / DFLASH_BLOCK_SCALE)


def dflash_accept_length(a16: float, block: int = DFLASH_BLOCK_REF, window: int | None = None) -> float:
    """The chain's accept length at `block` and draft `window` (DFLASH_* model); `a16` at block 16, no
    window. Never more than the block."""
    acc = 1 + (a16 - 1) * _block_reach(block) / _block_reach(DFLASH_BLOCK_REF)
    if window is not None:
        acc = 1 + (acc - 1) * (1 - DFLASH_WINDOW_LOSS * math.exp(-window / DFLASH_WINDOW_SCALE))
    return min(float(block), acc)


def dflash_step_factor(block: int = DFLASH_BLOCK_REF, window: int | None = None, running: int = 1) -> float:
    """Step time of a DFlash pass at `block` and `window` relative to block 16 with no window (same batch)."""
    per_req = 1 + DFLASH_TOKEN_BATCH_COST * (max(1, running) - 1)
    verify = (1 + DFLASH_TOKEN_COST * block * per_req) / (1 + DFLASH_TOKEN_COST * DFLASH_BLOCK_REF * per_req)
    draft = 1.0
    if window is not None:
        draft = 1 - DFLASH_DRAFT_SHARE + DFLASH_DRAFT_SHARE * min(1.0, window / DFLASH_WINDOW_FULL)
    return verify * draft


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

"""The simulator's server-lifetime counters and their Prometheus text (`/metrics`, SGLang's metric names)."""

from __future__ import annotations

import time

from ddtree_tui.sim.config import SimConfig


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
        # the scheduler's retract aborts; num_aborted_requests_total is client_aborts_total: 0.5.23 counts there
        # only the tokenizer manager's abort_request, which a client's disconnect calls
        self.aborted_total = 0
        self.client_aborts_total = 0
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
        # issue 26: SGLang 0.5.23's finished-request counters (observe_one_finished_request: generation tokens
        # and verify calls are counted when a request ends) and the waiting queue (max_running_requests)
        self.queued = 0
        self.verify_calls_total = 0
        self.ttft = _Hist((0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.itl = _Hist((0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1))
        self.e2e = _Hist((0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))


def prometheus_text(s: SimStats, cfg: SimConfig) -> str:
    """What `/metrics` answers: gauges, counters and the three latency histograms."""
    labels = f'model_name="{cfg.model_path}",tp_rank="0"'
    usage = min(1.0, s.running_tokens / 1_000_000)
    hit = s.cache_hit_tokens / s.prompt_tokens_total if s.prompt_tokens_total else 0.0
    gauges: list[tuple[str, float, str]] = [
        ("sglang:num_running_reqs", s.running, "The number of running requests."),
        ("sglang:num_queue_reqs", s.queued, "The number of requests in the waiting queue."),
        ("sglang:token_usage", round(usage, 6), "The token usage."),
        ("sglang:gen_throughput", round(s.last_gen_throughput, 3), "The generation throughput (token/s)."),
        ("sglang:cache_hit_rate", round(hit, 6), "The prefix cache hit rate."),
    ]
    if cfg.speculative_algorithm:
        gauges += [
            ("sglang:spec_accept_length", round(s.last_accept_length, 4), "The average acceptance length."),
            ("sglang:spec_accept_rate", round(s.last_accept_rate, 4), "The average acceptance rate."),
        ]
    counters: list[tuple[str, float, str]] = [
        ("sglang:prompt_tokens_total", s.prompt_tokens_total, "Number of prefill tokens processed."),
        ("sglang:generation_tokens_total", s.generation_tokens_total, "Number of generation tokens."),
        ("sglang:num_requests_total", s.requests_total, "Number of requests processed."),
        ("sglang:num_aborted_requests_total", s.client_aborts_total, "Number of requests aborted."),
        ("sglang:cached_tokens_total", s.cache_hit_tokens, "Number of cached prompt tokens."),
    ]
    if cfg.speculative_algorithm:
        counters.append(
            (
                "sglang:spec_verify_calls_total",
                s.verify_calls_total,
                "Number of speculative decoding verification calls.",
            )
        )
    lines: list[str] = []
    for name, value, help_ in gauges:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {value}"]
    for name, value, help_ in counters:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value)}"]
    lines += s.ttft.render("sglang:time_to_first_token_seconds", labels)
    lines += s.itl.render("sglang:inter_token_latency_seconds", labels)
    lines += s.e2e.render("sglang:e2e_request_latency_seconds", labels)
    return "\n".join(lines) + "\n"

"""A smoke test: one short streaming request to one service, bounded in time, summed up in a line.

It replaces the `curl -N .../generate` an engineer types after a deploy. It reuses the benchmark's client
(`measure_request`), so the numbers (server token counts, TTFT, accept length) mean what they mean in a
benchmark, and nothing a server does can raise out of it: every failure is the result's `error`.
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from ddtree_tui.bench.client import measure_request, served_model
from ddtree_tui.bench.models import BenchTarget, SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.model.identity import TargetIdentity

DEFAULT_PROMPT = "Say hello in one short sentence."
DEFAULT_MAX_NEW_TOKENS = 32
DEFAULT_TIMEOUT = 30.0
OUTPUT_KEPT = 200  # characters of the answer kept: enough to see it is language, small enough for a line


class SmokeResult(BaseModel):
    """One smoke request, measured. `ok` is False with `error` saying why; numbers are None when unknown."""

    ref: str
    ok: bool
    error: str | None = None
    output: str = ""  # the first OUTPUT_KEPT characters of the answer
    output_tokens: int | None = None  # the server's count (meta_info.completion_tokens)
    ttft_ms: float | None = None
    tok_s: float | None = None  # output tokens / end-to-end time
    accept_length: float | None = None  # speculative decoding only
    latency_s: float | None = None  # end to end, as the client saw it
    base_url: str | None = None
    finish_reason: str | None = None
    status_code: int | None = None  # of a refused or aborted request
    identity: TargetIdentity | None = None  # who answered on the port (issue 29); None for a --url smoke

    def line(self) -> str:
        """The one-line summary printed by `ddtree-tui smoke` and shown as the TUI's notification."""
        if not self.ok:
            return f"smoke {self.ref}: FAILED — {self.error or 'unknown error'}"
        bits = [f"{self.output_tokens if self.output_tokens is not None else '?'} tokens"]
        if self.ttft_ms is not None:
            bits.append(f"TTFT {self.ttft_ms:.0f} ms")
        if self.tok_s is not None:
            bits.append(f"{self.tok_s:.1f} tok/s")
        if self.accept_length is not None:
            bits.append(f"accept {self.accept_length:.2f}")
        if self.latency_s is not None:
            bits.append(f"{self.latency_s:.2f} s")
        text = self.output.replace("\n", " ").strip()
        if len(text) > 60:
            text = text[:59] + "…"
        line = f"smoke {self.ref}: ok — {', '.join(bits)} — {text!r}"
        if self.identity is not None and self.identity.forced:
            line += f" — FORCED, not verified: {self.identity.reason}"
        return line


def failed(ref: str, error: str, base_url: str | None = None) -> SmokeResult:
    return SmokeResult(ref=ref, ok=False, error=error, base_url=base_url)


async def smoke_request(
    ref: str,
    base_url: str,
    *,
    algorithm: str = "dflash",
    mode: str | None = None,
    prompt: str = DEFAULT_PROMPT,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    timeout: float = DEFAULT_TIMEOUT,
    api: str = "generate",
    model: str | None = None,
) -> SmokeResult:
    """One streaming request (/generate, or the OpenAI chat / completions API) through the bench client;
    never raises for what the server does. Like the bench it never goes through a proxy (trust_env off):
    the URL is a loopback or forwarded port of ours."""
    p = Prompt(id="smoke", title="smoke", messages=[{"role": "user", "content": prompt}])
    sp = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, api=api)  # type: ignore[arg-type]
    texts: list[str] = []
    t0 = time.monotonic()
    async with StreamClient(connect_timeout=min(timeout, 10.0)) as client:
        if api != "generate" and not model:
            model = await served_model(client, base_url, timeout=min(timeout, 5.0))
        target = BenchTarget(ref=ref, base_url=base_url, algorithm=algorithm, mode=mode, model=model)
        r = await measure_request(client, target, p, sp, timeout=timeout, on_text=texts.append)
    latency = r.e2e_s if r.e2e_s is not None else time.monotonic() - t0
    return SmokeResult(
        ref=ref,
        ok=r.ok,
        error=r.error,
        output=(texts[0] if texts else "")[:OUTPUT_KEPT],
        output_tokens=r.output_tokens,
        ttft_ms=r.ttft_s * 1000 if r.ttft_s is not None else None,
        tok_s=r.tok_s,
        accept_length=r.accept_length,
        latency_s=latency,
        base_url=base_url,
        finish_reason=r.finish_reason,
        status_code=r.status_code,
    )

"""Streaming clients for SGLang's `/generate` and the OpenAI chat endpoint, on the bench's own transport
(bench/stream.py: a raw asyncio protocol that stamps each chunk at the socket read) and orjson.

Each request becomes one RequestResult. Nothing a server sends can crash the client: a malformed line, an
error object, an HTTP error, a dropped connection or a stall are all recorded as that request's error and
the run goes on. Token counts come from the server (`meta_info.completion_tokens`, `usage`), never from
counting chunks, because speculative decoding puts several tokens in one chunk.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ddtree_tui.bench.metrics import Timeline, timeline_metrics
from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.stream import StreamClient, StreamError

TokensCallback = Callable[[int, float], None]  # (tokens so far, seconds since send)


@dataclass
class SSEItem:
    kind: str  # "json" | "done" | "bad"
    data: Any = None


def parse_sse_line(line: str | bytes) -> SSEItem | None:
    """One line of a server-sent-event stream; None for blank lines, comments and non-data fields."""
    if isinstance(line, str):
        line = line.encode("utf-8", "surrogateescape")
    if not line or line.startswith(b":"):
        return None
    if not line.startswith(b"data:"):
        if line.startswith((b"event:", b"id:", b"retry:")):
            return None
        return SSEItem("bad", line.decode("utf-8", "replace"))
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return SSEItem("done")
    if not payload:
        return None
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return SSEItem("bad", payload.decode("utf-8", "replace"))
    if not isinstance(obj, dict):
        return SSEItem("bad", payload.decode("utf-8", "replace"))
    return SSEItem("json", obj)


def _short(s: str, n: int = 120) -> str:
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 1] + "…"


def _err_message(obj: dict[str, Any]) -> str:
    e = obj.get("error")
    if isinstance(e, dict):
        return str(e.get("message") or e)
    return str(e)


class _Acc:
    """Per-request parsing state shared by both protocols."""

    def __init__(self, t_send: float) -> None:
        self.tl = Timeline(t_send)
        self.errors: list[str] = []
        self.done = False
        self.prev_tokens = 0
        self.seen_tokens = 0  # best running estimate, for progress events
        self.text_mode: str | None = None
        self.acc_text = ""  # output so far
        self.first_raw: str | None = None
        self.meta: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.malformed = 0

    def bad(self, raw: str) -> None:
        self.malformed += 1
        if self.malformed <= 3:
            self.errors.append(f"malformed chunk: {_short(str(raw))}")

    def text_delta(self, text: str) -> str:
        """The new text of a /generate chunk, detecting cumulative vs incremental streaming."""
        if not text:
            return ""
        if self.text_mode is None:
            if self.first_raw is None:
                self.first_raw = text
                self.acc_text = text
                return text
            if text.startswith(self.first_raw) and len(text) > len(self.first_raw):
                self.text_mode = "cumulative"
            else:
                self.text_mode = "incremental"
        if self.text_mode == "cumulative":
            if text.startswith(self.acc_text):
                d = text[len(self.acc_text) :]
                self.acc_text = text
                return d
            # not a prefix after all: the server streams deltas
            self.text_mode = "incremental"
        self.acc_text += text
        return text


def _finish(fr: Any) -> str | None:
    if isinstance(fr, dict):
        return str(fr.get("type")) if fr.get("type") is not None else json.dumps(fr)
    return None if fr is None else str(fr)


def _handle_generate(acc: _Acc, obj: dict[str, Any], now: float) -> None:
    if "error" in obj and "text" not in obj:
        acc.errors.append(f"server error: {_short(_err_message(obj))}")
        return
    text = obj.get("text")
    meta = obj.get("meta_info") or {}
    if not isinstance(meta, dict):
        meta = {}
    delta = acc.text_delta(text) if isinstance(text, str) else ""
    ct = meta.get("completion_tokens")
    new: float | None = None
    if isinstance(ct, int):
        new = float(ct - acc.prev_tokens)
        acc.prev_tokens = ct
        acc.seen_tokens = ct
    elif delta:
        acc.seen_tokens += 1
    acc.tl.add(now, new, bool(delta))
    acc.meta = meta
    if meta.get("finish_reason") is not None:
        acc.finish = _finish(meta.get("finish_reason"))


def _handle_openai(acc: _Acc, obj: dict[str, Any], now: float) -> None:
    if "error" in obj and "choices" not in obj:
        acc.errors.append(f"server error: {_short(_err_message(obj))}")
        return
    usage = obj.get("usage")
    if isinstance(usage, dict):
        acc.usage = usage
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return
    c = choices[0]
    delta = c.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or ""
    else:
        content = c.get("text") or ""
        reasoning = ""
    new: float | None = None
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        ct = usage["completion_tokens"]
        new = float(ct - acc.prev_tokens)
        acc.prev_tokens = ct
        acc.seen_tokens = ct
    elif content or reasoning:
        acc.seen_tokens += 1
    if content or reasoning or new:
        acc.tl.add(now, new, bool(content))
    acc.acc_text += content
    if c.get("finish_reason") is not None:
        acc.finish = _finish(c.get("finish_reason"))


def request_body(prompt: Prompt, sp: SamplingParams) -> tuple[str, dict[str, Any]]:
    """Path and JSON body for one request."""
    max_new = prompt.max_new_tokens or sp.max_new_tokens
    if sp.api == "chat":
        return "/v1/chat/completions", {
            "model": "default",
            "messages": prompt.as_messages(),
            "max_tokens": max_new,
            "temperature": sp.temperature,
            "ignore_eos": sp.ignore_eos,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    return "/generate", {
        "text": prompt.as_text(),
        "sampling_params": {
            "max_new_tokens": max_new,
            "temperature": sp.temperature,
            "ignore_eos": sp.ignore_eos,
        },
        "stream": True,
    }


async def measure_request(
    client: StreamClient,
    target: BenchTarget,
    prompt: Prompt,
    sp: SamplingParams,
    *,
    seq: int = 0,
    repeat: int = 0,
    warmup: bool = False,
    timeout: float | None = None,
    on_tokens: TokensCallback | None = None,
    tokens_interval: float = 0.1,
    on_text: Callable[[str], None] | None = None,
) -> RequestResult:
    """Send one streaming request and measure it; never raises for anything the server does.

    Each chunk's time is the time of the socket read that brought it (bench/stream.py), not the time it was
    parsed. `on_text` gets the whole output text once, at the end: a smoke test shows it, a benchmark does
    not keep it.
    """
    path, body = request_body(prompt, sp)
    sp = sp.model_copy(update={"max_new_tokens": prompt.max_new_tokens or sp.max_new_tokens})
    handle = _handle_openai if sp.api == "chat" else _handle_generate
    payload = orjson.dumps(body)
    url = target.base_url.rstrip("/") + path
    started_at = time.time()
    t_send = time.monotonic()
    acc = _Acc(t_send)
    last_cb = 0.0
    try:
        async with asyncio.timeout(timeout):
            async with await client.post(url, payload, target.headers or None) as resp:
                if resp.status != 200:
                    raw = (await resp.read()).decode("utf-8", "replace")
                    msg = raw
                    try:
                        msg = _err_message(json.loads(raw)) if raw.strip().startswith("{") else raw
                    except (json.JSONDecodeError, ValueError):
                        pass
                    acc.errors.append(f"HTTP {resp.status}: {_short(msg)}")
                else:
                    async for batch in resp.batches():
                        for now, line in batch:
                            if line.startswith(b"data: {"):  # the hot path: one JSON object a chunk
                                try:
                                    obj = orjson.loads(line[6:])
                                except orjson.JSONDecodeError:
                                    obj = None  # parse_sse_line below records it as malformed
                                if isinstance(obj, dict):
                                    handle(acc, obj, now)
                                    continue
                            item = parse_sse_line(line)
                            if item is None:
                                continue
                            if item.kind == "done":
                                acc.done = True
                                acc.tl.t_end = now
                                break
                            if item.kind == "bad":
                                acc.bad(item.data)
                                continue
                            handle(acc, item.data, now)
                        if on_tokens is not None and acc.seen_tokens:  # progress: at most once a batch
                            now = batch[-1][0]
                            if now - last_cb >= tokens_interval:
                                last_cb = now
                                on_tokens(acc.seen_tokens, now - t_send)
                        if acc.done:
                            break
    except TimeoutError:
        acc.errors.append(f"timeout after {timeout:g} s")
    except StreamError as e:
        acc.errors.append(f"connection: {_short(str(e))}")
    except OSError as e:
        acc.errors.append(f"connection: {e}")
    if acc.tl.t_end is None:
        acc.tl.t_end = time.monotonic()
        if not acc.errors:
            acc.errors.append("stream ended without [DONE]")
    if on_text is not None:
        on_text(acc.acc_text)
    return _result(acc, target, prompt, sp, seq, repeat, warmup, started_at)


def _result(
    acc: _Acc,
    target: BenchTarget,
    prompt: Prompt,
    sp: SamplingParams,
    seq: int,
    repeat: int,
    warmup: bool,
    started_at: float,
) -> RequestResult:
    meta, usage = acc.meta, acc.usage
    total: int | None = None
    source: str | None = None
    if sp.api == "chat" and usage and isinstance(usage.get("completion_tokens"), int):
        total, source = usage["completion_tokens"], "usage"
    elif isinstance(meta.get("completion_tokens"), int):
        total, source = meta["completion_tokens"], "meta_info"
    elif acc.tl.chunks:
        total, source = sum(1 for c in acc.tl.chunks if c.has_text), "chunks"
    m = timeline_metrics(acc.tl, total)
    verify = meta.get("spec_verify_ct")
    accept = meta.get("spec_accept_length")
    if not isinstance(accept, int | float):
        accept = total / verify if isinstance(verify, int) and verify > 0 and total else None
    prompt_tokens = meta.get("prompt_tokens")
    cached = meta.get("cached_tokens")
    if usage:
        prompt_tokens = usage.get("prompt_tokens", prompt_tokens)
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = details.get("cached_tokens", cached)
    rate = meta.get("spec_accept_rate")
    server_e2e = meta.get("e2e_latency")
    return RequestResult(
        service=target.ref,
        algorithm=target.algorithm,
        mode=target.mode,
        prompt_id=prompt.id,
        repeat=repeat,
        seq=seq,
        warmup=warmup,
        started_at=started_at,
        ok=not acc.errors,
        error="; ".join(acc.errors) if acc.errors else None,
        output_tokens=total,
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
        cached_tokens=cached if isinstance(cached, int) else None,
        accept_length=float(accept) if accept is not None else None,
        accept_rate=float(rate) if isinstance(rate, int | float) else None,
        spec_verify_ct=verify if isinstance(verify, int) else None,
        finish_reason=acc.finish,
        text_mode=acc.text_mode if sp.api == "generate" else "incremental",  # type: ignore[arg-type]
        tokens_source=source,  # type: ignore[arg-type]
        output_chars=len(acc.acc_text),
        server_e2e_s=float(server_e2e) if isinstance(server_e2e, int | float) else None,
        sampling=sp,
        **m,  # type: ignore[arg-type]
    )


async def server_info(client: StreamClient, base_url: str, timeout: float = 5.0) -> dict[str, Any] | None:
    """`/server_info`, falling back to the older `/get_server_info`; None when neither answers."""
    for path in ("/server_info", "/get_server_info"):
        try:
            async with asyncio.timeout(timeout):
                async with await client.get(base_url.rstrip("/") + path) as r:
                    raw = await r.read()
                    status = r.status
        except (StreamError, TimeoutError, OSError):
            return None
        if status == 200:
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return None
            return obj if isinstance(obj, dict) else None
    return None

"""Streaming clients for SGLang's `/generate` and the OpenAI chat / completions endpoints, on the bench's own
transport (bench/stream.py: a raw asyncio protocol that stamps each chunk at the socket read) and orjson.

Each request becomes one RequestResult. Nothing a server sends can crash the client: a malformed line, an
error object, an HTTP error, a dropped connection, a stall or a response over the transport's limits (a
line, a head or a body too long: bench/stream.py StreamLimits) are all recorded as that request's error and
the run goes on. `/server_info` and `/v1/models` bodies are read under the same body limit. Token counts come from the server (`meta_info.completion_tokens`, `usage`), never from
counting chunks, because speculative decoding puts several tokens in one chunk; so they are checked: a count
outside its sane bounds (negative; more output tokens than the request asked for, plus SPEC_SLACK; an accept
length that is negative, not finite or above MAX_ACCEPT_LENGTH) fails the request with the value it gave,
and is never used as a number.

Scored as real servers send (recorded from SGLang 0.5.23's own serializers in tests/fixtures/sglang/): an
abort finish_reason is a failure with its status code; reasoning_content is generated text (TTFT counts it,
the first answer token is timed separately); a chat stream that ends with a finish_reason is complete without
[DONE]; usage that arrives only at the end is spread over the chunks by their text (`tokens_source`
"usage-estimated"). The per-chunk handlers and `end_of_stream` hold all of that; `measure_request` only
moves bytes.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import orjson

from ddtree_tui.bench.sse import err_code, err_message, http_error_message, parse_sse_line, sglext_spec, short
from ddtree_tui.bench.stream import StreamClient, StreamError, StreamLimitError
from ddtree_tui.bench.timeline import Chunk, Timeline, timeline_metrics
from ddtree_tui.lib.jsontypes import JsonObject

if TYPE_CHECKING:
    # the request and result models: a worker process measures with `measure_raw` and never imports them (its
    # start is CPU each run pays per process, issue 26); `measure_request` and `to_result` import them at use
    from ddtree_tui.bench.models import BenchTarget, RequestResult, SamplingParams
    from ddtree_tui.bench.prompts import Prompt

TokensCallback = Callable[[int, float], None]  # (tokens so far, seconds since send)
INFO_MAX_BYTES = 4 * 1024 * 1024  # a /server_info or /v1/models body (SGLang's are a few KiB); above: None
# output tokens a server may report past max_new_tokens before the count is not believed: a speculative
# step can accept a whole draft past the limit before the server trims it (drafts are far shorter than this)
SPEC_SLACK = 64
MAX_ACCEPT_LENGTH = 1024.0  # tokens per verify pass: no draft (chain or tree path) is this long
MAX_PROMPT_TOKENS = 100_000_000  # prompt / cached tokens: above any model's context


# a finished request is scored this much later while other streams of this process are open (measure_request);
# DDTREE_BENCH_DEFER_MS=0 scores at once (for a side-by-side measurement)
FINALIZE_DEFER_S = float(os.environ.get("DDTREE_BENCH_DEFER_MS", "5")) / 1000.0


class _Streams:
    """Streams of this process being read now (one event loop per process)."""

    open = 0


_streams = _Streams()


class MeasureOpts(TypedDict):
    """How one request is measured besides what and where: the same whether the runner measures it on its
    own loop (measure_request) or hands it to a worker process (Worker.measure)."""

    seq: int
    repeat: int
    warmup: bool
    timeout: float | None
    tokens_interval: float


class _Acc:
    """Per-request parsing state shared by every protocol."""

    def __init__(self, t_send: float, max_new_tokens: int = 0) -> None:
        self.tl = Timeline(t_send)
        self.errors: list[str] = []
        self.asked = max_new_tokens
        self.max_tokens = max_new_tokens + SPEC_SLACK if max_new_tokens > 0 else MAX_PROMPT_TOKENS
        self.insane: set[str] = set()  # the counts already found out of bounds (one error each)
        self.done = False
        self.prev_tokens = 0
        self.seen_tokens = 0  # best running estimate, for progress events
        self.text_mode: str | None = None
        self.acc_text = ""  # the output (answer text, reasoning not included): whole at the end of the stream
        self.answer: list[
            str
        ] = []  # OpenAI: the answer's pieces, joined once at the end (not re-copied a chunk)
        self.raw_texts: list[tuple[int, str]] = []  # /generate: (timeline index, text as sent)
        self.ids_mode: str | None = None  # what output_ids lengths said: cumulative / incremental
        self.meta: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None
        self.usage_points: list[tuple[int, int]] = []  # (timeline index, usage.completion_tokens)
        self.finish: str | None = None
        self.abort: dict[str, Any] | None = None
        self.status_code: int | None = None
        self.first_answer_t: float | None = None
        self.reasoning_chars = 0
        self.malformed = 0
        self.spec_ext: Mapping[str, object] | None = (
            None  # OpenAI: sglext.spec_tokens_details (its own chunk)
        )

    def count(self, name: str, v: object, hi: int | None = None) -> int | None:
        """A whole-number count the server reported (None when absent or not a whole number, as before); one
        outside 0…hi (default: the output bound) fails the request with the value and is not used."""
        if not isinstance(v, int) or isinstance(v, bool):
            return None
        hi = self.max_tokens if hi is None else hi
        if 0 <= v <= hi:
            return v
        if name not in self.insane:
            self.insane.add(name)
            why = (
                f"max_new_tokens {self.asked} + {SPEC_SLACK}"
                if hi == self.max_tokens and self.asked > 0
                else "the sane bound"
            )
            self.errors.append(f"bad count: {name} {short(str(v), 40)} is outside 0…{hi} ({why})")
        return None

    def accept_length(self, v: object) -> float | None:
        """`spec_accept_length` when it is a finite number in 0…MAX_ACCEPT_LENGTH; else the request fails."""
        if not isinstance(v, int | float) or isinstance(v, bool):
            return None
        if math.isfinite(v) and 0 <= v <= MAX_ACCEPT_LENGTH:
            return float(v)
        if "spec_accept_length" not in self.insane:
            self.insane.add("spec_accept_length")
            self.errors.append(
                f"bad count: spec_accept_length {short(str(v), 40)} is outside 0…{MAX_ACCEPT_LENGTH:g}"
            )
        return None

    def bad(self, raw: str) -> None:
        self.malformed += 1
        if self.malformed <= 3:
            self.errors.append(f"malformed chunk: {short(str(raw))}")

    def server_error(self, obj: dict[str, Any]) -> None:
        code = err_code(obj)
        if code is not None and self.status_code is None:
            self.status_code = code
        where = f" ({code})" if code is not None else ""
        self.errors.append(f"server error{where}: {short(err_message(obj))}")

    def text_delta(self, text: str) -> str:
        """The new text of a /generate chunk under what is known so far of the text mode.

        SGLang sends the whole text so far by default and deltas with --incremental-streaming-output. A
        cumulative chunk may repeat the previous text exactly (a detokenizer piece waiting for the rest of a
        UTF-8 character), and a delta may happen to start with the text so far, so one chunk pair decides
        nothing: the stream is cumulative while every text extends (or repeats) the one before, and turns
        incremental for good at the first one that does not. `output_ids` (cumulative too by default) settle
        it where they can; `final_text` re-reads every chunk under the mode finally decided.
        """
        if not text:
            return ""  # no new text under either mode, and no evidence of which one it is
        prev = self.raw_texts[-1][1] if self.raw_texts else None
        self.raw_texts.append((len(self.tl.chunks), text))
        if self.text_mode == "incremental" or self.ids_mode == "incremental":
            self.text_mode = "incremental"
            return text  # acc_text: joined once, by final_text
        if prev is None:
            self.acc_text = text
            return text
        if text.startswith(prev):
            if len(text) > len(prev) or self.ids_mode == "cumulative":
                self.text_mode = self.text_mode or ("cumulative" if len(text) > len(prev) else None)
            d = text[len(prev) :]
            self.acc_text = text
            return d
        # not an extension of the text so far: the server streams deltas (all earlier chunks were deltas too)
        self.text_mode = "incremental"
        self.acc_text = "".join(t for _, t in self.raw_texts)
        return text

    def final_text(self) -> None:
        """Settle the text mode at the end of the stream and mark which chunks brought new text."""
        if not self.raw_texts:
            return
        if self.ids_mode == "incremental":
            self.text_mode = "incremental"
        if self.text_mode != "incremental":
            self.text_mode = self.text_mode or ("cumulative" if len(self.raw_texts) > 1 else None)
            prev = ""
            for i, t in self.raw_texts:
                if i < len(self.tl.chunks):
                    self.tl.chunks[i].has_text = len(t) > len(prev)
                    self.tl.chunks[i].chars = max(0, len(t) - len(prev))
                prev = t
            self.acc_text = self.raw_texts[-1][1]
        else:
            for i, t in self.raw_texts:
                if i < len(self.tl.chunks):
                    self.tl.chunks[i].has_text = bool(t)
                    self.tl.chunks[i].chars = len(t)
            self.acc_text = "".join(t for _, t in self.raw_texts)


def _finish(fr: object) -> str | None:
    if isinstance(fr, dict):
        return str(fr.get("type")) if fr.get("type") is not None else json.dumps(fr)
    return None if fr is None else str(fr)


def _handle_generate(acc: _Acc, obj: dict[str, Any], now: float) -> None:
    if "error" in obj and "text" not in obj and "meta_info" not in obj:
        acc.server_error(obj)
        return
    text = obj.get("text")
    meta = obj.get("meta_info") or {}
    if not isinstance(meta, dict):
        meta = {}
    ct = acc.count("completion_tokens", meta.get("completion_tokens"))
    ids = obj.get("output_ids")
    prev = acc.prev_tokens
    if acc.ids_mode is None and isinstance(ct, int) and isinstance(ids, list) and 0 < prev < ct:
        # cumulative streaming sends every id so far, incremental only this chunk's
        if len(ids) == ct:
            acc.ids_mode = "cumulative"
        elif len(ids) == ct - prev:
            acc.ids_mode = "incremental"
    delta = acc.text_delta(text) if isinstance(text, str) else ""
    new: float | None = None
    if isinstance(ct, int):
        new = float(max(0, ct - acc.prev_tokens))
        acc.prev_tokens = max(acc.prev_tokens, ct)
        acc.seen_tokens = acc.prev_tokens
    elif delta:
        acc.seen_tokens += 1
    acc.tl.add(now, new, bool(delta))
    acc.tl.chunks[-1].chars = len(delta)
    acc.meta = meta
    fr = meta.get("finish_reason")
    if fr is not None:
        acc.finish = _finish(fr)
        if isinstance(fr, dict) and fr.get("type") == "abort":
            acc.abort = fr


def _handle_openai(acc: _Acc, obj: dict[str, Any], now: float) -> None:
    """A chat (`delta.content` / `delta.reasoning_content`) or completions (`text`) chunk."""
    if "error" in obj and "choices" not in obj:
        acc.server_error(obj)
        return
    usage = obj.get("usage")
    choices = obj.get("choices") or []
    if not choices and (spec := sglext_spec(obj)) is not None:  # a choice-less chunk: never on the hot path
        acc.spec_ext = spec
    c = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = c.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
    else:
        content = c.get("text") or ""
        reasoning = ""
    content = content if isinstance(content, str) else ""
    reasoning = reasoning if isinstance(reasoning, str) else ""
    if content or reasoning:
        acc.tl.chunks.append(Chunk(now, None, True, len(content) + len(reasoning)))
        acc.seen_tokens += 1
        if content:
            acc.answer.append(content)
            if acc.first_answer_t is None:
                acc.first_answer_t = now
        if reasoning:
            acc.reasoning_chars += len(reasoning)
    if isinstance(usage, dict):
        acc.usage = usage
        ct = acc.count("usage.completion_tokens", usage.get("completion_tokens"))
        if ct is not None:
            idx = len(acc.tl.chunks) - 1 if (content or reasoning) else -1
            acc.usage_points.append((idx, ct))
            acc.seen_tokens = max(acc.seen_tokens, ct)
    fr = c.get("finish_reason")
    if fr is not None:
        acc.finish = _finish(fr)
        if fr == "abort" or (isinstance(fr, dict) and fr.get("type") == "abort"):
            acc.abort = fr if isinstance(fr, dict) else {"type": "abort"}


def end_of_stream(acc: _Acc, api: str, now: float) -> None:
    """Decide how the stream ended, once, after the I/O loop: complete, aborted or cut short.

    - A finish_reason of type abort (SGLang's decode retraction, 503/500) is a failed request with its status
      code and message, even though a normal chunk and [DONE] followed.
    - [DONE], or a chunk with a finish_reason (some OpenAI-compatible servers end the stream right after it,
      with the usage on it and no [DONE]), is a complete stream.
    - Anything else ended early.
    """
    acc.final_text()
    if acc.answer:
        acc.acc_text = "".join(acc.answer)
    if acc.tl.t_end is None:
        acc.tl.t_end = now
    if acc.abort is not None:
        code = acc.abort.get("status_code")
        if isinstance(code, int):
            acc.status_code = code
        msg = acc.abort.get("message") or "aborted"
        where = f" ({code})" if isinstance(code, int) else ""
        acc.errors.insert(0, f"aborted by the server{where}: {short(str(msg))}")
        return
    if acc.errors or acc.done:
        return
    if acc.finish is None:
        acc.errors.append("stream ended without [DONE] or a finish_reason")


def _request_body(prompt: Prompt, sp: SamplingParams, model: str | None = None) -> tuple[str, dict[str, Any]]:
    """Path and JSON body for one request.

    `ignore_eos` is SGLang's sampling parameter: always sent on /generate (false unless asked), and on the
    OpenAI APIs only when asked, since strict servers reject unknown fields (HTTP 422). `model` is the name
    the server serves (from /v1/models or --model); SGLang accepts any, others refuse a wrong one.
    """
    max_new = prompt.max_new_tokens or sp.max_new_tokens
    name = model or sp.model or "default"
    if sp.api in ("chat", "completions"):
        body: dict[str, Any] = {"model": name}
        if sp.api == "chat":
            body["messages"] = prompt.as_messages()
        else:
            body["prompt"] = prompt.as_text()
        body.update(
            {
                "max_tokens": max_new,
                "temperature": sp.temperature,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
        if sp.ignore_eos:
            body["ignore_eos"] = True
        if sp.spec_details:  # SGLang's per-request spec details (sglext); strict servers refuse the field
            body["return_spec_tokens_details"] = True
        return ("/v1/chat/completions" if sp.api == "chat" else "/v1/completions"), body
    return "/generate", {
        "text": prompt.as_text(),
        "sampling_params": {
            "max_new_tokens": max_new,
            "temperature": sp.temperature,
            "ignore_eos": sp.ignore_eos,
        },
        "stream": True,
    }


def prepare(target: BenchTarget, prompt: Prompt, sp: SamplingParams) -> tuple[str, bytes, SamplingParams]:
    """What one request sends: its URL, its JSON body, and the sampling it asked for (the prompt's own
    max_new_tokens where it has one), which its result records."""
    path, body = _request_body(prompt, sp, target.model)
    sp = sp.model_copy(update={"max_new_tokens": prompt.max_new_tokens or sp.max_new_tokens})
    return target.base_url.rstrip("/") + path, orjson.dumps(body), sp


def to_result(
    fields: JsonObject,
    target: BenchTarget,
    prompt: Prompt,
    sp: SamplingParams,
    *,
    seq: int = 0,
    repeat: int = 0,
    warmup: bool = False,
) -> RequestResult:
    """One RequestResult from what `measure_raw` measured and what was asked (`prepare`'s sampling)."""
    from ddtree_tui.bench.models import RequestResult, request_key

    return RequestResult.model_validate(
        {**request_key(target, prompt, seq=seq, repeat=repeat, warmup=warmup), **fields, "sampling": sp}
    )


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
    url, payload, sp = prepare(target, prompt, sp)
    fields, _ = await measure_raw(
        client,
        url,
        payload,
        target.headers or None,
        sp.api,
        sp.max_new_tokens,
        timeout=timeout,
        on_tokens=on_tokens,
        tokens_interval=tokens_interval,
        on_text=on_text,
    )
    return to_result(fields, target, prompt, sp, seq=seq, repeat=repeat, warmup=warmup)


async def measure_raw(
    client: StreamClient,
    url: str,
    payload: bytes,
    headers: dict[str, str] | None,
    api: str,
    max_new_tokens: int,
    *,
    timeout: float | None = None,
    on_tokens: TokensCallback | None = None,
    tokens_interval: float = 0.1,
    on_text: Callable[[str], None] | None = None,
) -> tuple[JsonObject, float]:
    """`measure_request` without the request and result models (what a worker process runs): the measured
    fields of a RequestResult (all but the request's key and its sampling: `to_result` adds those) and the
    monotonic time the request was sent."""
    handle = _handle_openai if api != "generate" else _handle_generate
    started_at = time.time()
    t_send = time.monotonic()
    acc = _Acc(t_send, max_new_tokens)
    last_cb = 0.0
    _streams.open += 1
    try:
        async with asyncio.timeout(timeout):
            async with await client.post(url, payload, headers) as resp:
                # the send time is the transport's: taken when the request's bytes were ready, just before a
                # connection is taken and written to (what came before, building the request, is not waiting)
                started_at += resp.t_send - t_send
                t_send = acc.tl.t_send = resp.t_send
                if resp.status != 200:
                    raw = (await resp.read()).decode("utf-8", "replace")
                    acc.status_code = resp.status
                    acc.errors.append(f"HTTP {resp.status}: {short(http_error_message(raw))}")
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
    except StreamLimitError as e:  # the server sent more than the client reads (bench/stream.py StreamLimits)
        acc.errors.append(f"limit: {short(str(e))}")
    except StreamError as e:
        acc.errors.append(f"connection: {short(str(e))}")
    except OSError as e:
        acc.errors.append(f"connection: {e}")
    finally:
        _streams.open -= 1
    if _streams.open > 0 and FINALIZE_DEFER_S > 0:
        # every time is stamped already; scoring a request costs about a millisecond (ITL quantiles, the
        # result), and streams that end together (a closed loop of equal lengths) would each have their
        # last read stamped that much later per stream scored before them: the others' reads go first
        await asyncio.sleep(FINALIZE_DEFER_S)
    end_of_stream(acc, api, time.monotonic())
    if on_text is not None:
        on_text(acc.acc_text)
    return _fields(acc, api, started_at), t_send


def _spread(acc: _Acc, total: int) -> None:
    """Give each text chunk of an OpenAI stream its share of `total` tokens, by its characters (a chunk of
    thinking or answer text carries tokens in proportion to its length, near enough), then correct the
    shares so they add up to `total` exactly. Used when the usage arrives only at the end."""
    chunks = [c for c in acc.tl.chunks if c.has_text]
    if not chunks:
        return
    chars = [max(1, c.chars) for c in chunks]
    whole = sum(chars)
    shares = [total * n / whole for n in chars]
    for c, k in zip(chunks, shares, strict=True):
        c.new_tokens = k


def _usage_tokens(acc: _Acc) -> tuple[int | None, str | None]:
    """(total, source) of an OpenAI stream, filling each chunk's tokens from usage where it says them."""
    points = [(i, ct) for i, ct in acc.usage_points if i >= 0]
    total = acc.count("usage.completion_tokens", acc.usage.get("completion_tokens")) if acc.usage else None
    if (
        total is not None
        and len(points) >= 2
        and len(points) >= len([c for c in acc.tl.chunks if c.has_text]) - 1
    ):
        # continuous usage: every chunk says the running count, so each chunk's tokens are known
        prev = 0
        for i, ct in points:
            acc.tl.chunks[i].new_tokens = float(max(0, ct - prev))
            prev = max(prev, ct)
        return total, "usage"
    if total is not None:
        _spread(acc, total)
        return total, "usage-estimated"
    n = sum(1 for c in acc.tl.chunks if c.has_text)
    return (n or None), ("chunks" if n else None)


def _fields(acc: _Acc, api: str, started_at: float) -> JsonObject:
    """The measured fields of one request's RequestResult (JSON values: a worker sends them as they are)."""
    meta, usage = acc.meta, acc.usage
    total: int | None = None
    source: str | None = None
    if api != "generate":
        total, source = _usage_tokens(acc)
    elif (ct := acc.count("completion_tokens", meta.get("completion_tokens"))) is not None:
        total, source = ct, "meta_info"
    elif acc.tl.chunks and "completion_tokens" not in acc.insane:
        total, source = sum(1 for c in acc.tl.chunks if c.has_text), "chunks"
    m = timeline_metrics(acc.tl, total)
    first_answer = acc.first_answer_t - acc.tl.t_send if acc.first_answer_t is not None else None
    if api == "generate" or not acc.reasoning_chars:
        first_answer = m.get("ttft_s") if first_answer is None else first_answer
    # the spec keys: /generate's final meta_info, else the OpenAI stream's sglext.spec_tokens_details
    spec = meta if "spec_verify_ct" in meta or "spec_accept_length" in meta else (acc.spec_ext or meta)
    verify = acc.count("spec_verify_ct", spec.get("spec_verify_ct"))
    accept = acc.accept_length(spec.get("spec_accept_length"))
    if not verify and not accept:  # sglext's defaults (0) where the server had no spec numbers
        verify = accept = None
    if accept is None and "spec_accept_length" not in acc.insane:
        accept = total / verify if verify and total else None
    prompt_tokens = meta.get("prompt_tokens")
    cached = meta.get("cached_tokens")
    if usage:
        prompt_tokens = usage.get("prompt_tokens", prompt_tokens)
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = details.get("cached_tokens", cached)
    prompt_tokens = acc.count("prompt_tokens", prompt_tokens, MAX_PROMPT_TOKENS)
    cached = acc.count("cached_tokens", cached, MAX_PROMPT_TOKENS)
    rate = spec.get("spec_accept_rate")
    server_e2e = meta.get("e2e_latency")
    out: JsonObject = {
        "started_at": started_at,
        "ok": not acc.errors,
        "error": "; ".join(acc.errors) if acc.errors else None,
        "status_code": acc.status_code,
        "aborted": acc.abort is not None,
        "first_answer_s": first_answer,
        "output_tokens": total,
        "prompt_tokens": prompt_tokens,
        "cached_tokens": cached,
        "accept_length": float(accept) if accept is not None else None,
        "accept_rate": float(rate) if isinstance(rate, int | float) else None,
        "spec_verify_ct": verify,
        "finish_reason": acc.finish,
        "text_mode": acc.text_mode if api == "generate" else "incremental",
        "reasoning_chars": acc.reasoning_chars,
        "tokens_source": source,
        "output_chars": len(acc.acc_text),
        "server_e2e_s": float(server_e2e) if isinstance(server_e2e, int | float) else None,
    }
    out.update(m)  # type: ignore[arg-type]  # TimelineMetrics: floats, ints and a list of floats
    return out


async def served_model(client: StreamClient, base_url: str, timeout: float = 5.0) -> str | None:
    """The first model id `/v1/models` lists (the name an OpenAI-compatible server wants); None if none."""
    try:
        async with asyncio.timeout(timeout):
            async with await client.get(base_url.rstrip("/") + "/v1/models", max_bytes=INFO_MAX_BYTES) as r:
                raw = await r.read()
                status = r.status
        if status != 200:
            return None
        data = orjson.loads(raw)
    except (StreamError, TimeoutError, OSError, orjson.JSONDecodeError):
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if isinstance(items, list):
        for it in items:
            if isinstance(it, dict) and isinstance(it.get("id"), str) and it["id"]:
                return str(it["id"])
    return None


async def server_info(client: StreamClient, base_url: str, timeout: float = 5.0) -> JsonObject | None:
    """`/server_info`, falling back to the older `/get_server_info`; None when neither answers."""
    for path in ("/server_info", "/get_server_info"):
        try:
            async with asyncio.timeout(timeout):
                async with await client.get(base_url.rstrip("/") + path, max_bytes=INFO_MAX_BYTES) as r:
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

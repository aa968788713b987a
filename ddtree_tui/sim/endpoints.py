"""The generation endpoints in their wire formats: SGLang's native `/generate` (SSE with cumulative or
incremental text and meta_info) and the OpenAI `/v1/chat/completions` and `/v1/completions` (SGLang's
chunk shapes, or another server's: usage on the finish chunk, no [DONE], FastAPI errors, strict fields).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from ddtree_tui.sim.config import REASONING_SHARE, Fault, approx_tokens
from ddtree_tui.sim.engine import Drop, SimEngine

# the request fields a strict OpenAI server knows (openai's ChatCompletion/Completion create parameters)
_OPENAI_FIELDS = frozenset(
    "model messages prompt max_tokens max_completion_tokens temperature top_p n stream stream_options stop "
    "presence_penalty frequency_penalty logit_bias logprobs top_logprobs user seed tools tool_choice "
    "response_format suffix echo best_of parallel_tool_calls".split()
)


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


def _prompt(body: dict[str, Any], chat: bool) -> str | None:
    """A chat request's messages in the chat template, or a completion's prompt; None when missing."""
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return None
        turns = "".join(
            f"<|im_start|>{m.get('role', 'user')}\n{_content(m.get('content'))}<|im_end|>\n"
            for m in msgs
            if isinstance(m, dict)
        )
        return turns + "<|im_start|>assistant\n"
    prompt: Any = body.get("prompt")
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt else ""
    return prompt if isinstance(prompt, str) else None


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "SimulatedError", "code": status}, "object": "error"},
        status=status,
    )


class SimEndpoints(SimEngine):
    """SimEngine plus the request parsing and the response shapes of the three generation endpoints."""

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

    def _request_args(
        self, request: web.Request, body: dict[str, Any], max_new: Any, what: str
    ) -> tuple[int, list[Fault]] | web.Response:
        """The request's token limit as an int and its faults, or the 400 that says which one is bad."""
        try:
            n = int(max_new)
        except (TypeError, ValueError):
            return self._error(400, f"{what} must be an integer")
        try:
            return n, self._request_faults(request.headers, body)
        except ValueError as e:
            return self._error(400, str(e))

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
            except Drop:
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

        delay = self.cfg.real_seconds(self.cfg.disconnect_abort_s)
        gen: asyncio.Future[Any] | None = None  # the request as a task of its own (only with a delay)
        gone: list[asyncio.TimerHandle] = []  # the abort timer, once the client went (disconnect_abort_s)

        def client_gone(gen: asyncio.Future[Any]) -> None:
            # SGLang's create_abort_task: `delay` seconds after the client went, abort the request if it is
            # still there; until then it decodes on, its chunks written nowhere
            if not gone and not gen.done():
                gone.append(asyncio.get_running_loop().call_later(delay, gen.cancel))
                gen.add_done_callback(lambda _: gone[0].cancel())

        async def emit(ev: dict[str, Any]) -> None:
            if gone:
                return
            try:
                if ev.get("malformed"):
                    await resp.write(b'data: {"text": "this chunk is not json\n\n')
                    return
                for obj in render(ev):
                    payload = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
                    await resp.write(b"data: " + payload.encode() + b"\n\n")
            except (ConnectionResetError, ConnectionError):
                if gen is None:
                    raise
                client_gone(gen)

        try:
            if delay > 0:
                # its own task, so that the handler's cancellation (the client went) does not end it
                gen = asyncio.ensure_future(self._generation(prompt, max_new, faults, emit))
                self._active.add(gen)  # cancelled on stop, as the handlers are
                gen.add_done_callback(self._active.discard)
                gen.add_done_callback(lambda f: f.cancelled() or f.exception())  # ended after its handler
                await asyncio.shield(gen)
            else:
                await self._generation(prompt, max_new, faults, emit)  # in the handler's task: ends with it
        except asyncio.CancelledError:
            if gen is not None and not self._shutting_down:
                client_gone(gen)  # aiohttp cancelled the handler: the client went; the request decodes on
            raise
        except Drop:
            _abort(request)
            return resp
        except (ConnectionResetError, ConnectionError):
            return resp
        if gone:
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
        args = self._request_args(request, body, sp.get("max_new_tokens", 128), "max_new_tokens")
        if isinstance(args, web.Response):
            return args
        max_new, faults = args
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
        prompt = _prompt(body, chat)
        if prompt is None:
            return self._error(400, "'messages' is required" if chat else "'prompt' is required")
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 128
        args = self._request_args(request, body, max_tokens, "max_tokens")
        if isinstance(args, web.Response):
            return args
        max_new, faults = args
        usage_wanted = bool((body.get("stream_options") or {}).get("include_usage"))
        model = body.get("model") or cfg.model_path
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        sglang_style = not (cfg.usage_on_finish or cfg.strict_openai)
        reasoning_until = [0]
        first = [True]
        spec_wanted = bool(body.get("return_spec_tokens_details")) and sglang_style  # issue 26: sglext

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

        def piece(d: dict[str, Any], rid: str) -> dict[str, Any]:
            """A chat chunk carrying one delta, not the last."""
            return chunk([{"index": 0, "delta": d, "logprobs": None, "finish_reason": None}], rid)

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
                out.append(piece(delta(content="", role="assistant"), rid))
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
                    thinking = lo < reasoning_until[0]
                    out.append(piece(delta(reasoning=text) if thinking else delta(content=text), rid))
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
                details = (
                    self._spec_details(ev["completion_tokens"], ev["verify_ct"]) if spec_wanted else None
                )
                if details is not None:
                    # serving_chat/serving_completions: a choice-less chunk with `sglext` after the finish
                    # chunk, before the usage chunk (usage null there, as model_dump_json writes it)
                    out.append({**chunk([], rid), "usage": None, "sglext": {"spec_tokens_details": details}})
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
            out = {
                "id": last["id"],
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": model,
                "choices": [ch],
                "usage": usage(last),
            }
            details = (
                self._spec_details(last["completion_tokens"], last["verify_ct"]) if spec_wanted else None
            )
            if details is not None:  # the non-streaming response carries sglext at response level
                out["sglext"] = {"spec_tokens_details": details}
            return out

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

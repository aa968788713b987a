"""The simulator's engine: one request's verify passes paced in real time (step time from the batch, the
DDTree model and drift), the radix prefix cache, the KV capacity (retraction), the waiting queue
(max_running_requests), injected faults, and the counters and scheduler log lines they produce.

SimEngine has no HTTP in it beyond the request's fault header; `endpoints.py` speaks the wire formats and
`server.py` serves them.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from ddtree_tui.sim.config import (
    CACHE_PAGE_CHARS,
    FAULT_HEADER,
    RETRACT_ABORT_MESSAGE,
    Fault,
    SimConfig,
    approx_tokens,
    parse_faults,
    token_texts,
)
from ddtree_tui.sim.logs import decode_line, log_prefix, prefill_line
from ddtree_tui.sim.metrics import SimStats
from ddtree_tui.sim.prefixcache import PrefixCache


class Drop(Exception):
    """Close the connection without finishing the response."""


class SimEngine:
    """The state and the generation model of one simulated server (SimServer adds HTTP)."""

    def __init__(self, cfg: SimConfig | None = None, log: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg or SimConfig()
        self.faults = parse_faults(self.cfg.faults)
        self.stats = SimStats()
        self._log_sink = log
        self._runner: web.AppRunner | None = None
        self._started = 0.0
        self._shutting_down = False
        self._cache = PrefixCache(CACHE_PAGE_CHARS)
        self.port: int = self.cfg.port
        self.exited = asyncio.Event()  # set when the exit fault fired (in-process mode)
        self._active: set[asyncio.Task[Any]] = set()  # generation handlers, cancelled on stop
        self._slots: asyncio.Semaphore | None = None  # max_running_requests (made on the serving loop)
        self._first_request: float | None = None  # monotonic time of the first generation (drift clock)

    def log(self, msg: str) -> None:
        line = log_prefix() + msg
        if self._log_sink is not None:
            self._log_sink(line)
        else:
            print(line, file=sys.stderr, flush=True)

    async def stop(self) -> None:
        """Answer 503 from now on and cancel every generation in flight (SimServer also closes the site)."""
        self._shutting_down = True
        me = asyncio.current_task()
        for t in list(self._active):
            if t is not me:
                t.cancel()

    @property
    def loading(self) -> bool:
        return time.monotonic() - self._started < self.cfg.real_seconds(self.cfg.load_time)

    def drift_clock(self) -> float:
        """Simulated seconds since the first generation request (0 before it): real ones times time_scale."""
        if self._first_request is None:
            return 0.0
        return (time.monotonic() - self._first_request) * self.cfg.time_scale

    def start_drift(self, kinds: set[str]) -> None:
        """Start the configured slowdown and/or memory creep now (their `*_after` set to the drift clock's
        reading; before any request the drift clock starts here): a soak test times the drift to its own
        windows, not to a second process's clock."""
        now = self.drift_clock()
        if self._first_request is None:
            self._first_request = time.monotonic()
        upd = {f"{k}_after": now for k in kinds & {"slowdown", "mem_creep"}}
        self.cfg = self.cfg.model_copy(update=upd)

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

    # --- the generation engine -----------------------------------------------------------------------
    def _request_faults(self, headers: Mapping[str, str], body: dict[str, Any]) -> list[Fault]:
        """The server's faults, then the request's (the X-Sim-Fault header, `sim_fault` in the body)."""
        faults = list(self.faults)
        faults += parse_faults(headers.get(FAULT_HEADER))
        sp = body.get("sampling_params")
        for src in (body.get("sim_fault"), sp.get("sim_fault") if isinstance(sp, dict) else None):
            if isinstance(src, str | list):
                faults += parse_faults(src)
        return faults

    def _cached_tokens(self, prompt: str) -> int:
        """The radix cache's hit: the longest prefix shared with any earlier prompt (whole pages of
        CACHE_PAGE_CHARS characters), as SGLang's RadixAttention reuses a shared system prompt too
        (sim/prefixcache.py: chained page keys, so a trace's long prompts cost one pass; issue 26)."""
        best = self._cache.hit_and_insert(prompt)
        return approx_tokens(prompt[:best]) if best else 0

    async def _generation(
        self, prompt: str, max_new_tokens: int, faults: list[Fault], emit: Callable[[dict[str, Any]], Any]
    ) -> dict[str, Any]:
        """One request; with `max_running_requests` it first waits for a running slot (the waiting queue)."""
        arrived = time.monotonic()  # SGLang times TTFT and e2e from the request's arrival, queue included
        if not self.cfg.max_running_requests:
            return await self._generation_run(prompt, max_new_tokens, faults, emit, arrived)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.cfg.max_running_requests)
        self.stats.queued += 1  # sglang:num_queue_reqs while it waits for a running slot
        try:
            await self._slots.acquire()
        except asyncio.CancelledError:
            if not self._shutting_down:  # the client went while it waited: aborted from the queue
                self.log("Request is disconnected from the client side. Abort request (waiting in the queue)")
                self.stats.client_aborts_total += 1
            raise
        finally:
            self.stats.queued -= 1
        try:
            return await self._generation_run(prompt, max_new_tokens, faults, emit, arrived)
        finally:
            self._slots.release()

    async def _generation_run(
        self,
        prompt: str,
        max_new_tokens: int,
        faults: list[Fault],
        emit: Callable[[dict[str, Any]], Any],
        arrived: float | None = None,
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
        st.cache_hit_tokens += cached
        self._log_prefill(1, prompt_tokens - cached, cached, st.running_tokens + prompt_tokens)
        fmap = {f.kind: f.arg for f in faults}
        rid = uuid.uuid4().hex
        t0 = time.monotonic()
        t_in = t0 if arrived is None else arrived  # TTFT, e2e and e2e_latency count the queue wait too
        delay = fmap.get("slow_first_token", 0.0)
        if cfg.prefill_rate > 0:
            delay += (prompt_tokens - cached) / cfg.prefill_rate
        delay = cfg.real_seconds(delay)
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
                    raise Drop()
                if "exit" in fmap and done >= fmap["exit"]:
                    self._exit_now()
                    raise Drop()
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
                            "e2e_latency": now - t_in,
                        }
                    )
                    return {"id": rid, "completion_tokens": done, "prompt_tokens": prompt_tokens}
                if i == 0:
                    st.ttft.observe(now - t_in)
                else:
                    st.itl.observe((now - last_t) / k)
                last_t = now
                prev = done
                done += k
                st.running_tokens += k
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
                    ev["e2e_latency"] = now - t_in
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
                        "e2e_latency": time.monotonic() - t_in,
                    }
                )
        except (asyncio.CancelledError, ConnectionError):
            # the client went away (aiohttp cancels the handler, or a write finds the socket closed): SGLang's
            # tokenizer manager aborts such a request (request.is_disconnected(), or the stream's abort task)
            # and frees its KV cache, with this message; logged so a client's cancellation can be seen
            if not self._shutting_down:
                self.log(
                    f"Request is disconnected from the client side. Abort request rid={rid} ({done} tokens out)"
                )
                # 0.5.23's abort_request counts it in num_aborted_requests_total, and num_requests_total when
                # the scheduler's abort finish reaches collect_metrics. (A real server's streaming response
                # calls abort_request from a background task 2 s after the client went: disconnect_abort_s,
                # sim/endpoints.py; with 0 the cancellation lands here at once.)
                st.client_aborts_total += 1
            raise
        finally:
            st.running -= 1
            st.running_tokens -= prompt_tokens + done
            st.e2e.observe(time.monotonic() - t_in)
            # counted when the request ends, as 0.5.23's observe_one_finished_request does (num_requests_total
            # and prompt_tokens_total too: a window's delta is the requests that finished in it)
            st.requests_total += 1
            st.prompt_tokens_total += prompt_tokens
            st.generation_tokens_total += done
            st.verify_calls_total += verify
        return {"id": rid, "completion_tokens": done, "prompt_tokens": prompt_tokens}

    def _log_prefill(self, seqs: int, new: int, cached: int, used: int) -> None:
        cap = self.cfg.kv_capacity or 1_000_000
        usage = min(1.0, used / cap)
        self.log(prefill_line(seqs, new, cached, usage, self.stats.running, self.cfg.prefill_rate or 0.0))

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
        cap = self.cfg.kv_capacity or 1_000_000
        accept = (acc_len, acc_rate) if self.cfg.speculative_algorithm else None
        usage = min(1.0, st.running_tokens / cap)
        self.log(decode_line(st.running, st.running_tokens, usage, st.last_gen_throughput, accept))
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

    def _spec_details(self, completion_tokens: int, verify_ct: int) -> dict[str, Any] | None:
        """`sglext.spec_tokens_details` of the OpenAI APIs (issue 26): 0.5.23's SpecTokensDetails
        (entrypoints/openai/protocol.py) as `spec_tokens_details_from_meta_info` fills it from the final
        meta_info, every field present; None without speculation (SGLang then sends no sglext chunk)."""
        spec = self._spec_final(completion_tokens, verify_ct)
        if not spec or self.cfg.old_meta_names:
            return None
        return {
            "spec_accept_rate": spec["spec_accept_rate"],
            "spec_accept_length": spec["spec_accept_length"],
            "spec_cap_length": 0.0,
            "spec_block_accept_length": 0.0,
            "spec_num_correct_drafts": spec["spec_num_correct_drafts"],
            "spec_num_proposed_drafts": spec["spec_num_proposed_drafts"],
            "spec_verify_ct": spec["spec_verify_ct"],
            "spec_correct_drafts_histogram": [],
            "spec_cap_lens_histogram": [],
        }

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

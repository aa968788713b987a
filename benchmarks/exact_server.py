"""A ground-truth server for the benchmark client: SGLang `/generate`-style SSE at an exact, known rate.

Every streamed request gets its first chunk `--ttft` seconds after the request's last byte arrived, then
one chunk every `tokens_per_chunk / rate` seconds, each with `tokens_per_chunk` tokens (the last may carry
fewer), then `data: [DONE]` in the same write as the last chunk. Chunk k is due at an absolute time
(t_arrival + ttft + k * interval), so a late timer never shifts the chunks after it. By design:

    TTFT = ttft;  e2e = ttft + (chunks - 1) * interval;  tok/s = max_new_tokens / e2e

and because asyncio's timers fire up to ~1 ms late (epoll's millisecond timeout), the server also reports
what it really did, which is the truth a client is held to: the last chunk's meta_info carries
`exact_t_arrival`, `exact_t_first`, `exact_t_last` (time.monotonic(): CLOCK_MONOTONIC, one clock for every
process of the machine, so a client on the same machine compares them with its own stamps) and
`e2e_latency` = last send − arrival. GET /stats gives how late the chunks went out (POST /stats/reset). Text is cumulative by default (SGLang's default),
`--incremental` streams deltas. meta_info carries completion_tokens (running), finish_reason, e2e_latency
(the true one) and, above 1 token a chunk, spec_verify_ct (= chunks), like a speculative-decoding server.

`POST /v1/completions` with `"stream": true` (what AIPerf, GuideLLM, SGLang's bench_serving and ours all
speak; benchmarks/peers.py) streams the same schedule as OpenAI text_completion chunks of incremental text
(`max_tokens` words "w0 w1 …"), the last with finish_reason "length", then a usage chunk when
`stream_options.include_usage` asks for it, and `data: [DONE]`, all in the last chunk's write. The truth is
in GET /stats as for /generate (OpenAI chunks have no room for it).

A raw asyncio protocol (no framework) and precomputed chunk bytes keep the server's cost per chunk small;
it still shares the machine's cores with the client, which is why it reports its own lateness.

One process takes every connection by default. `ExactServer(cfg, procs=N)` starts N processes that share the
port (SO_REUSEPORT: the kernel hands each new connection to one of them), so a burst of hundreds of arrivals
and tens of thousands of chunks a second is spread over N event loops; each process also listens on a
control port of its own, and `ExactServer.get("/stats")` merges their records (requests, chunks and `done`
summed; lateness quantiles are the worst process's). Every process stamps with CLOCK_MONOTONIC, one clock.

Run: python benchmarks/exact_server.py --port 30500 --rate 1000 --tokens-per-chunk 4 --ttft 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any


@dataclass
class Config:
    rate: float = 150.0  # tokens per second per request (decode)
    tokens_per_chunk: int = 1
    ttft: float = 0.02
    incremental: bool = False

    @property
    def interval(self) -> float:
        return self.tokens_per_chunk / self.rate

    def chunks(self, n: int) -> int:
        return max(1, math.ceil(n / self.tokens_per_chunk))

    def true_e2e(self, n: int) -> float:
        return self.ttft + (self.chunks(n) - 1) * self.interval

    def true_tok_s(self, n: int) -> float:
        return n / self.true_e2e(n)


@dataclass
class Stats:
    chunks: int = 0
    requests: int = 0
    late: list[float] = field(default_factory=list)  # seconds late, one per chunk (capped list)
    done: list[tuple[float, float, float, int]] = field(default_factory=list)  # arrival, first, last, tokens

    def add(self, late: float) -> None:
        self.chunks += 1
        if len(self.late) < 2_000_000:
            self.late.append(late)

    def as_dict(self) -> dict[str, Any]:
        s = sorted(self.late)

        def q(p: float) -> float | None:
            return s[min(len(s) - 1, int(p * (len(s) - 1)))] * 1000 if s else None

        return {
            "requests": self.requests,
            "chunks": self.chunks,
            "late_ms_p50": q(0.5),
            "late_ms_p99": q(0.99),
            "late_ms_max": s[-1] * 1000 if s else None,
            "done": [{"t_arrival": a, "t_first": f, "t_last": la, "tokens": n} for a, f, la, n in self.done],
        }


def _frame(payload: bytes) -> bytes:
    """One SSE event as one HTTP/1.1 chunk."""
    ev = b"data: " + payload + b"\n\n"
    return f"{len(ev):x}\r\n".encode() + ev + b"\r\n"


@lru_cache(maxsize=64)
def _chunks(
    cfg_key: tuple[float, int, float, bool], n: int, prompt_tokens: int
) -> tuple[tuple[bytes, ...], dict[str, Any]]:
    """The framed chunks of a request of n tokens but the last (the same for every request of that length),
    and the last chunk's object: it is framed at send time, with the times the server really sent."""
    cfg = Config(*cfg_key)
    k = cfg.tokens_per_chunk
    nch = cfg.chunks(n)
    out = []
    text = ""
    last: dict[str, Any] = {}
    for i in range(nch):
        lo, hi = i * k, min(n, (i + 1) * k)
        piece = "".join(f"w{j} " for j in range(lo, hi))
        text += piece
        meta: dict[str, Any] = {
            "id": "exact",
            "finish_reason": None,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": hi,
            "cached_tokens": 0,
        }
        obj = {
            "text": piece if cfg.incremental else text,
            "output_ids": list(range(lo, hi)),
            "meta_info": meta,
        }
        if i == nch - 1:
            meta["finish_reason"] = {"type": "length", "length": n}
            if k > 1:
                meta["spec_verify_ct"] = nch
            last = obj
        else:
            out.append(_frame(json.dumps(obj, separators=(",", ":")).encode()))
    return tuple(out), last


def _oai_chunks(
    cfg_key: tuple[float, int, float, bool], n: int, prompt_tokens: int, usage: bool
) -> tuple[tuple[bytes, ...], bytes]:
    """/v1/completions: the framed chunks of a request of n tokens but the last, and the last write (the
    last chunk, the usage chunk when asked for, [DONE] and the end of the chunked body). The chunks are
    built once per length (_oai_frames), whatever the prompt: a tool's first request of a length it has not
    asked before costs the server no table, so no tool's measured requests pay for another's prompt."""
    out, last = _oai_frames(cfg_key, n)
    if usage:
        u = {
            "id": "cmpl-exact",
            "object": "text_completion",
            "created": 0,
            "model": "exact",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": n,
                "total_tokens": prompt_tokens + n,
            },
        }
        last += _frame(json.dumps(u, separators=(",", ":")).encode())
    return out, last + _frame(b"[DONE]") + b"0\r\n\r\n"


@lru_cache(maxsize=64)
def _oai_frames(cfg_key: tuple[float, int, float, bool], n: int) -> tuple[tuple[bytes, ...], bytes]:
    cfg = Config(*cfg_key)
    k = cfg.tokens_per_chunk
    nch = cfg.chunks(n)
    out = []
    last = b""
    for i in range(nch):
        lo, hi = i * k, min(n, (i + 1) * k)
        piece = "".join(f"w{j} " for j in range(lo, hi))
        fin = "length" if i == nch - 1 else None
        obj = {
            "id": "cmpl-exact",
            "object": "text_completion",
            "created": 0,
            "model": "exact",
            "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": fin}],
        }
        b = _frame(json.dumps(obj, separators=(",", ":")).encode())
        if i < nch - 1:
            out.append(b)
        else:
            last = b
    return tuple(out), last


_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


def _json_response(obj: Any, status: str = "200 OK") -> bytes:
    body = json.dumps(obj).encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        + body
    )


class ExactProtocol(asyncio.Protocol):
    def __init__(self, cfg: Config, stats: Stats) -> None:
        self.cfg = cfg
        self.stats = stats
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        t = time.monotonic()
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            lines = head.split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self.handle(method, path, body, t)

    def handle(self, method: str, path: str, body: bytes, t: float) -> None:
        assert self.transport is not None
        if path == "/health":
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        elif path in ("/server_info", "/get_server_info"):
            self.transport.write(
                _json_response(
                    {
                        "version": "exact",
                        "simulated": True,
                        "model_path": "exact",
                        "rate": self.cfg.rate,
                        "tokens_per_chunk": self.cfg.tokens_per_chunk,
                        "ttft": self.cfg.ttft,
                    }
                )
            )
        elif path == "/v1/models":
            self.transport.write(
                _json_response({"object": "list", "data": [{"id": "exact", "object": "model"}]})
            )
        elif path == "/flush_cache":
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        elif path == "/stats":
            self.transport.write(_json_response(self.stats.as_dict()))
        elif path == "/stats/reset":
            self.stats.__init__()  # type: ignore[misc]
            self.transport.write(_json_response({"ok": True}))
        elif path == "/generate" and method == "POST":
            try:
                req = json.loads(body)
                n = int((req.get("sampling_params") or {}).get("max_new_tokens") or 128)
                prompt = req.get("text") or ""
            except (ValueError, TypeError, AttributeError):
                self.transport.write(_json_response({"error": {"message": "bad body"}}, "400 Bad Request"))
                return
            self.stats.requests += 1
            c = self.cfg
            chunks, last = _chunks(
                (c.rate, c.tokens_per_chunk, c.ttft, c.incremental), n, len(prompt.split())
            )
            self.transport.write(_SSE_HEAD)
            loop = asyncio.get_running_loop()
            t0 = t + c.ttft
            times = {"t_arrival": t}
            # one timer at a time per stream (each send arms the next): an arrival costs O(1), so a burst of
            # requests is stamped on arrival without waiting for thousands of timers to be armed
            loop.call_at(t0, self._send, chunks, 0, t0, c.interval, last, times)
        elif path == "/v1/completions" and method == "POST":
            try:
                req = json.loads(body)
                n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
                prompt = req.get("prompt") or ""
                if isinstance(prompt, list):
                    prompt = " ".join(str(x) for x in prompt)
                usage = bool((req.get("stream_options") or {}).get("include_usage"))
                if not req.get("stream"):
                    raise ValueError("stream only")
            except (ValueError, TypeError, AttributeError):
                self.transport.write(
                    _json_response({"error": {"message": "bad body (streaming only)"}}, "400 Bad Request")
                )
                return
            self.stats.requests += 1
            c = self.cfg
            ochunks, olast = _oai_chunks(
                (c.rate, c.tokens_per_chunk, c.ttft, c.incremental), n, len(str(prompt).split()), usage
            )
            self.transport.write(_SSE_HEAD)
            t0 = t + c.ttft
            otimes = {"t_arrival": t, "tokens": float(n)}
            asyncio.get_running_loop().call_at(t0, self._send, ochunks, 0, t0, c.interval, olast, otimes)
        else:
            self.transport.write(_json_response({"error": {"message": "not found"}}, "404 Not Found"))

    def _send(
        self,
        chunks: tuple[bytes, ...],
        i: int,
        t0: float,
        interval: float,
        last: dict[str, Any] | bytes,
        times: dict[str, float],
    ) -> None:
        if self.closed or self.transport is None:
            return
        due = t0 + i * interval
        if i == len(chunks):
            self._send_last(last, due, times)
            return
        now = time.monotonic()
        self.stats.add(max(0.0, now - due))
        times.setdefault("t_first", now)
        self.transport.write(chunks[i])
        asyncio.get_running_loop().call_at(
            due + interval, self._send, chunks, i + 1, t0, interval, last, times
        )

    def _send_last(self, obj: dict[str, Any] | bytes, due: float, times: dict[str, float]) -> None:
        """The last chunk, with the truth: monotonic times of arrival, first and last send (one clock for
        every process of this machine), and e2e_latency = last send − arrival (an OpenAI stream's last
        write is framed already: its truth is only in /stats)."""
        assert self.transport is not None
        now = time.monotonic()
        self.stats.add(max(0.0, now - due))
        t_first = times.setdefault("t_first", now)
        if isinstance(obj, bytes):
            self.stats.done.append((times["t_arrival"], t_first, now, int(times["tokens"])))
            self.transport.write(obj)
            return
        meta = dict(obj["meta_info"])
        self.stats.done.append((times["t_arrival"], t_first, now, int(meta["completion_tokens"])))
        meta.update(
            e2e_latency=now - times["t_arrival"],
            exact_t_arrival=times["t_arrival"],
            exact_t_first=t_first,
            exact_t_last=now,
        )
        b = _frame(json.dumps({**obj, "meta_info": meta}, separators=(",", ":")).encode())
        self.transport.write(b + _frame(b"[DONE]") + b"0\r\n\r\n")


async def serve(
    cfg: Config, port: int, host: str = "127.0.0.1", reuse_port: bool = False, control_port: int | None = None
) -> None:
    loop = asyncio.get_running_loop()
    stats = Stats()
    server = await loop.create_server(
        lambda: ExactProtocol(cfg, stats), host, port, backlog=1024, reuse_port=reuse_port or None
    )
    servers = [server]
    if control_port is not None:  # this process's own port: its /stats, whichever process the port gave
        servers.append(await loop.create_server(lambda: ExactProtocol(cfg, stats), host, control_port))
    print(f"exact server on http://{host}:{port}: {cfg}", flush=True)
    async with contextlib.AsyncExitStack() as stack:
        for s in servers:
            await stack.enter_async_context(s)
        await server.serve_forever()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def merge_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The processes' /stats as one: counts and `done` summed; each lateness quantile the worst process's."""
    out: dict[str, Any] = {
        "requests": sum(p["requests"] for p in parts),
        "chunks": sum(p["chunks"] for p in parts),
        "done": [d for p in parts for d in p["done"]],
        "processes": len(parts),
    }
    for k in ("late_ms_p50", "late_ms_p99", "late_ms_max"):
        vals = [p[k] for p in parts if p.get(k) is not None]
        out[k] = max(vals) if vals else None
    return out


class ExactServer:
    """This file as child processes on a free port: `with ExactServer(cfg) as base_url: ...` (procs > 1: that
    many processes share the port, each with a control port of its own that `get`/`reset` speak to)."""

    def __init__(self, cfg: Config, procs: int = 1) -> None:
        self.cfg = cfg
        self.procs_n = max(1, procs)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.controls: list[int] = []
        self.base_url = ""

    def __enter__(self) -> str:
        port = _free_port()
        argv = [sys.executable, __file__, "--port", str(port), "--rate", str(self.cfg.rate)]
        argv += ["--tokens-per-chunk", str(self.cfg.tokens_per_chunk), "--ttft", str(self.cfg.ttft)]
        if self.cfg.incremental:
            argv.append("--incremental")
        if self.procs_n > 1:
            self.controls = [_free_port() for _ in range(self.procs_n)]
            for c in self.controls:
                self.procs.append(
                    subprocess.Popen(
                        [*argv, "--reuse-port", "--control-port", str(c)], stdout=subprocess.DEVNULL
                    )
                )
        else:
            self.procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
        self.base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        waiting = [port, *self.controls]
        while waiting and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", waiting[0]), 0.2):
                waiting.pop(0)
                continue
            time.sleep(0.05)
        if not waiting:
            return self.base_url
        self.__exit__()
        raise RuntimeError("exact server did not start")

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(5)
        self.procs = []

    def _get(self, url: str) -> Any:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    def get(self, path: str) -> Any:
        if not self.controls:
            return self._get(self.base_url + path)
        parts = [self._get(f"http://127.0.0.1:{c}{path}") for c in self.controls]
        return merge_stats(parts) if path == "/stats" else parts[0]

    def reset(self) -> None:
        self.get("/stats/reset")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=30500)
    ap.add_argument("--rate", type=float, default=150.0, help="tokens/s per request")
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--ttft", type=float, default=0.02, help="seconds")
    ap.add_argument("--incremental", action="store_true")
    ap.add_argument(
        "--reuse-port", action="store_true", help="share --port with other processes (SO_REUSEPORT)"
    )
    ap.add_argument("--control-port", type=int, help="also listen here (this process's own /stats)")
    a = ap.parse_args()
    cfg = Config(a.rate, a.tokens_per_chunk, a.ttft, a.incremental)
    try:
        asyncio.run(serve(cfg, a.port, reuse_port=a.reuse_port, control_port=a.control_port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

"""What the measured client's hot path costs in its own parts, on this machine (issue 26): one ticked read of a
stream (`_Conn.read_ticked`: the recvmsg with its kernel stamp, httptools, the SSE lines) with 1 or 5 chunks
waiting, on real loopback TCP; one SSE line through `measure_raw`'s consumer (orjson and `_handle_openai`);
and a 1000-chunk request's scoring (`_fields`: token counts and the ITL quantiles). Each is the median of
`--rounds` timings, in µs. The other tree's figures side by side: run it with that tree first on PYTHONPATH
(from a directory that is not a checkout, or `python -c` finds the checkout's package first).

Run: .venv/bin/python benchmarks/read_path.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time
from typing import Any

import orjson

from ddtree_tui.bench import client as cl
from ddtree_tui.bench import stream as st
from ddtree_tui.bench.sse import parse_sse_line

N_STREAMS = 64
OBJ = {
    "id": "cmpl-exact",
    "object": "text_completion",
    "created": 0,
    "model": "exact",
    "choices": [{"index": 0, "text": "w1 w2 w3 w4 ", "logprobs": None, "finish_reason": None}],
}
LINE = b"data: " + json.dumps(OBJ, separators=(",", ":")).encode()
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _frame(b: bytes) -> bytes:
    return f"{len(b):x}\r\n".encode() + b + b"\r\n"


class _Transport:
    """The transport calls a ticked read makes (none of them does anything here: the duplicate is read)."""

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def close(self) -> None:
        pass


def ticked_read_us(k: int, rounds: int) -> float:
    """µs per read of N_STREAMS streams with k chunks waiting in each (no event loop: with no consumer
    waiting, a ticked read makes no loop call)."""
    chunk = _frame(LINE + b"\n\n")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(N_STREAMS)
    pairs: list[tuple[st._Conn, socket.socket, socket.socket]] = []
    try:
        for _ in range(N_STREAMS):
            c = socket.create_connection(srv.getsockname())
            s, _ = srv.accept()
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = st._Conn(None, None, st._Ticker(0.005))
            conn.transport = _Transport()  # type: ignore[assignment]
            c.setblocking(False)
            c.setsockopt(socket.SOL_SOCKET, st._SO_TIMESTAMPNS, 1)
            conn.rsock, conn.ticking, conn.eager = c, True, 0
            s.sendall(HEAD)
            time.sleep(0.001)
            conn.read_ticked(0.0)  # the response head
            pairs.append((conn, c, s))
        out = []
        for _ in range(rounds):
            for _, _, s in pairs:
                for _ in range(k):
                    s.send(chunk)
            time.sleep(0.01)  # every chunk is in the receiving socket
            t = time.perf_counter()
            for conn, _, _ in pairs:
                conn.read_ticked(0.0)
            out.append((time.perf_counter() - t) / N_STREAMS * 1e6)
            for conn, _, _ in pairs:
                conn.lines.clear()
        return statistics.median(out)
    finally:
        for _, c, s in pairs:
            c.close()
            s.close()
        srv.close()


def _consume(batches: list[list[tuple[float, bytes]]]) -> cl._Acc:
    """measure_raw's loop body over batches of lines (the hot path: one JSON object a chunk)."""
    acc = cl._Acc(0.0, 1000)
    handle = cl._handle_openai
    for batch in batches:
        for now, line in batch:
            if line.startswith(b"data: {"):
                try:
                    obj = orjson.loads(line[6:])
                except orjson.JSONDecodeError:
                    obj = None
                if isinstance(obj, dict):
                    handle(acc, obj, now)
                    continue
            parse_sse_line(line)
    return acc


def consumer_us(rounds: int) -> tuple[float, float]:
    """(µs per line consumed, µs per chunk of scoring a 1000-chunk request read 5 chunks a read)."""
    lines = [(1000.0 + i * 0.001, LINE) for i in range(1000)]
    batches = [lines[i : i + 5] for i in range(0, len(lines), 5)]
    per_line = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(5):
            _consume(batches)
        per_line.append((time.perf_counter() - t) / 5000 * 1e6)
    acc = _consume(batches)
    for i, c in enumerate(acc.tl.chunks):
        c.t = 1000.0 + (i // 5) * 0.005
    acc.tl.t_end = acc.tl.chunks[-1].t
    per_chunk = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(5):
            cl._fields(acc, "completions", 0.0)
        per_chunk.append((time.perf_counter() - t) / 5000 * 1e6)
    return statistics.median(per_line), statistics.median(per_chunk)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    r1 = ticked_read_us(1, a.rounds)
    r5 = ticked_read_us(5, a.rounds)
    line, score = consumer_us(a.rounds)
    print("| part | µs | µs a chunk |")
    print("|---|---|---|")
    print(f"| a ticked read, 1 chunk waiting | {r1:.1f} | {r1:.1f} |")
    print(f"| a ticked read, 5 chunks waiting | {r5:.1f} | {r5 / 5:.1f} |")
    print(f"| one SSE line consumed (orjson, _handle_openai) | {line:.2f} | {line:.2f} |")
    print(f"| scoring a 1000-chunk request (_fields) | {score * 1000:.0f} | {score:.2f} |")


if __name__ == "__main__":
    main()

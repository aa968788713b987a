"""The benchmark harness's exact server in several processes (benchmarks/peers.py --server-procs, issue 26).

peers.py's truth is the server's own record of every request; with N processes sharing the port each keeps
its own, so the harness must merge them or it scores each tool against a share of its requests. Real
processes, a real SO_REUSEPORT port, real sockets; each request on a connection of its own so the kernel
spreads them over the processes."""

from __future__ import annotations

import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from exact_server import Config, ExactServer, merge_stats

N = 24
TOKENS = 8


def _one(base: str) -> bytes:
    body = json.dumps({"model": "exact", "prompt": "w0", "max_tokens": TOKENS, "stream": True}).encode()
    req = urllib.request.Request(base + "/v1/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:  # http.client: one connection a request
        return bytes(r.read())


def test_several_processes_share_the_port_and_their_records_merge() -> None:
    srv = ExactServer(Config(1000.0, 4, 0.01, incremental=True), procs=3)
    with srv as base:
        assert len(srv.procs) == 3 and len(srv.controls) == 3
        procs = list(srv.procs)
        with ThreadPoolExecutor(8) as ex:
            bodies = list(ex.map(lambda _: _one(base), range(N)))
        assert all(b.rstrip().endswith(b"data: [DONE]") for b in bodies)
        parts = [srv._get(f"http://127.0.0.1:{c}/stats") for c in srv.controls]
        # the kernel spread the connections: more than one process streamed (all on one: 3**-23)
        assert sum(1 for p in parts if p["requests"]) >= 2
        st = srv.get("/stats")
        assert st["processes"] == 3
        assert st["requests"] == N == len(st["done"])
        assert st["chunks"] == N * TOKENS // 4
        assert all(d["t_arrival"] < d["t_first"] <= d["t_last"] and d["tokens"] == TOKENS for d in st["done"])
        srv.reset()
        assert srv.get("/stats")["requests"] == 0
    assert all(p.poll() is not None for p in procs)  # every process it started has ended


def test_merge_takes_the_worst_lateness_and_sums_the_rest() -> None:
    a = {
        "requests": 2,
        "chunks": 10,
        "done": [1, 2],
        "late_ms_p50": 0.1,
        "late_ms_p99": 2.0,
        "late_ms_max": 3.0,
    }
    b = {"requests": 1, "chunks": 5, "done": [3], "late_ms_p50": 0.3, "late_ms_p99": 1.0, "late_ms_max": None}
    m = merge_stats([a, b])
    assert (m["requests"], m["chunks"], m["done"], m["processes"]) == (3, 15, [1, 2, 3], 2)
    assert (m["late_ms_p50"], m["late_ms_p99"], m["late_ms_max"]) == (0.3, 2.0, 3.0)

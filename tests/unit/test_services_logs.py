"""The SGLang log parser over each real-form line variant (reference: sglang.md and sglang 0.5.23's
metrics_reporter.py / pool_stats_observer.py)."""

from __future__ import annotations

import pytest

from ddtree_tui.services.logs import LogMetrics, parse_line


def parsed(line: str) -> LogMetrics:
    """The line parsed; a line the parser refuses fails the test here."""
    m = parse_line(line)
    assert m is not None, line
    return m


DECODE = (
    "[2026-11-29 18:07:27 TP0] Decode batch, #running-req: 1, #token: 612, token usage: 0.01, accept len: 3.42, "
    "accept rate: 0.61, cuda graph: True, gen throughput (token/s): 140.62, #queue-req: 0, "
)


def test_decode_line_with_year() -> None:
    m = parse_line(DECODE)
    assert m is not None and m.kind == "decode"
    assert m.timestamp == "2026-11-29 18:07:27" and m.tp_rank == 0
    assert (m.running_req, m.num_token, m.token_usage) == (1, 612, 0.01)
    assert (m.accept_len, m.accept_rate, m.gen_throughput, m.queue_req) == (3.42, 0.61, 140.62, 0)
    assert m.cuda_graph is True and m.usage == 0.01


def test_decode_line_without_year() -> None:
    m = parse_line(DECODE.replace("[2026-11-29 18:07:27 TP0]", "[11-29 18:07:27 TP0]"))
    assert m is not None and m.timestamp == "11-29 18:07:27" and m.accept_len == 3.42


# each batch-line variant and the fields it must give (the hybrid lines: usage as SGLang's own token_usage
# gauge, the fullest pool — mamba there — not the full-attention one)
VARIANTS = {
    "prefill": (
        "[2026-11-29 18:07:27 TP0] Prefill batch, #new-seq: 1, #new-token: 37, #cached-token: 0, "
        "token usage: 0.01, #running-req: 0, #queue-req: 0, ",
        dict(kind="prefill", new_seq=1, new_token=37, cached_token=0, token_usage=0.01, running_req=0,
             queue_req=0, accept_len=None, gen_throughput=None),
    ),
    "0.5.23 iteration, cap len, block accept len": (
        "[11-29 18:07:27 TP0] Decode batch [1234], #running-req: 4, #token: 9000, token usage: 0.12, "
        "accept len: 5.10, accept rate: 0.27, cap len: 6.00, block accept len: 4.80, cuda graph: True, "
        "gen throughput (token/s): 512.30, #queue-req: 2",
        dict(iteration=1234, cap_len=6.0, block_accept_len=4.8, accept_len=5.1, queue_req=2),
    ),
    "older 'Decode batch.' without accept rate": (
        "[2025-01-02 03:04:05 TP0] Decode batch. #running-req: 2, #token: 1200, token usage: 0.05, "
        "gen throughput (token/s): 88.10, #queue-req: 1",
        dict(kind="decode", running_req=2, num_token=1200, gen_throughput=88.1, queue_req=1, accept_len=None,
             accept_rate=None),
    ),
    "hybrid GDN decode": (
        "[11-29 18:07:27 TP0] Decode batch, #running-req: 1, #full token: 612, full token usage: 0.02, "
        "mamba num: 3, mamba usage: 0.10, accept len: 3.40, accept rate: 0.60, cuda graph: True, "
        "gen throughput (token/s): 140.60, #queue-req: 0, ",
        dict(full_token=612, full_token_usage=0.02, mamba_num=3, mamba_usage=0.1, token_usage=None, usage=0.1,
             num_token=None),
    ),
    "hybrid prefill usage parts": (
        "[11-29 18:07:27 TP0] Prefill batch, #new-seq: 1, #new-token: 50, #cached-token: 0, full token usage: 0.01, "
        "mamba usage: 0.05, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
        "input throughput (token/s): 1234.50",
        dict(kind="prefill", mamba_usage=0.05, input_throughput=1234.5, cuda_graph=False, pending_token=0),
    ),
}  # fmt: skip


@pytest.mark.parametrize("line, want", list(VARIANTS.values()), ids=list(VARIANTS))
def test_batch_line_variants(line: str, want: dict[str, object]) -> None:
    m = parsed(line)
    assert {k: getattr(m, k) for k in want} == want


def test_ray_prefix_with_dp_rank() -> None:
    line = "(SchedulerProcess pid=123, ip=10.0.0.5) [2026-11-29 18:07:27 DP1 TP3] " + DECODE.split("] ", 1)[1]
    m = parse_line(line)
    assert m is not None and m.ray_pid == 123 and m.dp_rank == 1 and m.tp_rank == 3
    assert m.gen_throughput == 140.62


def test_patched_spec_algo_key() -> None:
    m = parse_line(DECODE.replace("accept rate: 0.61, ", "accept rate: 0.61, spec algo: DDTREE, "))
    assert m is not None and m.spec_algo == "DDTREE" and m.accept_rate == 0.61


@pytest.mark.parametrize(
    "line",
    [
        "",
        "[2026-11-29 18:07:27] Load weight begin. avail mem=78.1 GB",
        'INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK',
        "[2026-11-29 18:07:27 TP0] Decode batch, garbage without keys",
        "[2026-11-29 18:07:27 TP0] Decode batch, accept len: notanumber, ",
    ],
)
def test_other_lines_are_not_metrics(line: str) -> None:
    assert parse_line(line) is None

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


def test_prefill_line() -> None:
    m = parsed(
        "[2026-11-29 18:07:27 TP0] Prefill batch, #new-seq: 1, #new-token: 37, #cached-token: 0, "
        "token usage: 0.01, #running-req: 0, #queue-req: 0, "
    )
    assert m.kind == "prefill"
    assert (m.new_seq, m.new_token, m.cached_token, m.token_usage, m.running_req, m.queue_req) == (
        1,
        37,
        0,
        0.01,
        0,
        0,
    )
    assert m.accept_len is None and m.gen_throughput is None


def test_0523_iteration_cap_len_block_accept_len() -> None:
    m = parsed(
        "[11-29 18:07:27 TP0] Decode batch [1234], #running-req: 4, #token: 9000, token usage: 0.12, "
        "accept len: 5.10, accept rate: 0.27, cap len: 6.00, block accept len: 4.80, cuda graph: True, "
        "gen throughput (token/s): 512.30, #queue-req: 2"
    )
    assert m.iteration == 1234
    assert (m.cap_len, m.block_accept_len, m.accept_len, m.queue_req) == (6.0, 4.8, 5.1, 2)


def test_ray_prefix_with_dp_rank() -> None:
    line = "(SchedulerProcess pid=123, ip=10.0.0.5) [2026-11-29 18:07:27 DP1 TP3] " + DECODE.split("] ", 1)[1]
    m = parse_line(line)
    assert m is not None and m.ray_pid == 123 and m.dp_rank == 1 and m.tp_rank == 3
    assert m.gen_throughput == 140.62


def test_older_decode_batch_dot_without_accept_rate() -> None:
    m = parsed(
        "[2025-01-02 03:04:05 TP0] Decode batch. #running-req: 2, #token: 1200, token usage: 0.05, "
        "gen throughput (token/s): 88.10, #queue-req: 1"
    )
    assert m.kind == "decode"
    assert (m.running_req, m.num_token, m.gen_throughput, m.queue_req) == (2, 1200, 88.1, 1)
    assert m.accept_len is None and m.accept_rate is None


def test_hybrid_gdn_fields() -> None:
    m = parsed(
        "[11-29 18:07:27 TP0] Decode batch, #running-req: 1, #full token: 612, full token usage: 0.02, "
        "mamba num: 3, mamba usage: 0.10, accept len: 3.40, accept rate: 0.60, cuda graph: True, "
        "gen throughput (token/s): 140.60, #queue-req: 0, "
    )
    assert (m.full_token, m.full_token_usage, m.mamba_num, m.mamba_usage) == (612, 0.02, 3, 0.1)
    # usage as SGLang's own token_usage gauge: the fullest pool (mamba here), not the full-attention one
    assert m.token_usage is None and m.usage == 0.1 and m.num_token is None


def test_hybrid_prefill_usage_parts() -> None:
    m = parsed(
        "[11-29 18:07:27 TP0] Prefill batch, #new-seq: 1, #new-token: 50, #cached-token: 0, full token usage: 0.01, "
        "mamba usage: 0.05, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
        "input throughput (token/s): 1234.50"
    )
    assert m.kind == "prefill" and m.mamba_usage == 0.05 and m.input_throughput == 1234.5
    assert m.cuda_graph is False and m.pending_token == 0


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

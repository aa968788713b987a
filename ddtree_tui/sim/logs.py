"""The scheduler log lines the simulator prints, in SGLang 0.5.23's words: the log parser and the TUI's log
pane read them exactly as they read a real server's."""

from __future__ import annotations

import time


def log_prefix() -> str:
    """configure_logger's format in 0.5.23: `[%(asctime)s{ms}{prefix}] ` with the year, rank tag TP0."""
    return time.strftime("[%Y-%m-%d %H:%M:%S TP0] ")


def prefill_line(seqs: int, new: int, cached: int, usage: float, running: int, prefill_rate: float) -> str:
    return (
        f"Prefill batch, #new-seq: {seqs}, #new-token: {new}, #cached-token: {cached}, "
        f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: 0, "
        f"#pending-token: 0, cuda graph: False, input throughput (token/s): {prefill_rate:.2f}"
    )


def decode_line(
    running: int, tokens: int, usage: float, gen_throughput: float, accept: tuple[float, float] | None
) -> str:
    """0.5.23's metrics_reporter.py decode line, ending in "#queue-req: N" without a trailing comma;
    `accept` (length, rate) only for a speculative server."""
    spec = f"accept len: {accept[0]:.2f}, accept rate: {accept[1]:.2f}, " if accept else ""
    return (
        f"Decode batch, #running-req: {running}, #token: {tokens}, "
        f"token usage: {usage:.2f}, {spec}cuda graph: True, "
        f"gen throughput (token/s): {gen_throughput:.2f}, #queue-req: 0"
    )

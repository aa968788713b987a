"""Mooncake-format trace replay: one request a JSON line,

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}

`timestamp` in milliseconds from the trace's start, `hash_ids` one id per 512-token block of the prompt.
Each block's text is made from its id (base.Filler), so two requests whose hash ids start alike have
prompts that start alike, block for block, and the server's prefix cache hits where the trace says it
would; tokens past the listed blocks are unique to the request. The prompt goes to /generate as it is
(no chat template), so block boundaries stay where the trace puts them.

`--trace FILE --trace-speed F` sends each request at timestamp / F after the start (F = 2: twice as fast),
open loop (whatever is in flight), each service replaying the whole trace in turn.

Read with bounds: MAX_TRACE_BYTES, MAX_LINE_BYTES a line, MAX_PROMPTS requests, input_length up to
MAX_INPUT_TOKENS (MAX_TRACE_TOKENS in all), output_length up to MAX_NEW_TOKENS; a bad line is an error naming the file, the line and
the field. Lines are replayed in timestamp order (a stable sort: equal timestamps keep the file's order).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ddtree_tui.bench.bounds import MAX_NEW_TOKENS, MAX_PROMPTS
from ddtree_tui.bench.workloads.base import Filler, WorkItem, WorkloadError

BLOCK_TOKENS = 512
MAX_TRACE_BYTES = 256 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
MAX_INPUT_TOKENS = 1_000_000
MAX_TIMESTAMP_MS = 7 * 24 * 3600 * 1000.0  # a week
MAX_TRACE_TOKENS = 32_000_000  # Σ input_length: the prompts are made up front (4 bytes a token)


class TraceRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


class Trace(BaseModel):
    """A trace as read: its records in replay order, its name and a digest of its bytes (which trace a run
    replayed, recorded with the run)."""

    model_config = ConfigDict(frozen=True)

    path: str
    sha256: str
    records: list[TraceRecord]

    def offsets(self, speed: float = 1.0) -> list[float]:
        """Each request's planned send time, seconds after the first request's."""
        if not self.records:
            return []
        t0 = self.records[0].timestamp_ms
        return [(r.timestamp_ms - t0) / 1000.0 / speed for r in self.records]

    def ideal_hit_tokens(self) -> int:
        """Prompt tokens a server with an unbounded prefix cache would find cached: per request, the leading
        blocks already seen at the start of an earlier request (whole 512-token blocks, within its input)."""
        seen: set[tuple[int, ...]] = set()
        total = 0
        for r in self.records:
            k = 0
            while k < len(r.hash_ids) and r.hash_ids[: k + 1] in seen:
                k += 1
            total += min(k * BLOCK_TOKENS, r.input_length)
            seen.update(r.hash_ids[: j + 1] for j in range(len(r.hash_ids)))
        return total


def _int(p: Path, n: int, obj: dict[str, Any], key: str, lo: int, hi: int) -> int:
    v = obj.get(key)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise WorkloadError(f"{p}:{n}: {key} {v!r}: must be a whole number {lo}…{hi}")
    return v


def _record(p: Path, n: int, s: str) -> TraceRecord:
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{p}:{n}: not a JSON object: {e.msg}") from None
    if not isinstance(obj, dict):
        raise WorkloadError(f"{p}:{n}: expected a JSON object")
    ts = obj.get("timestamp")
    if not isinstance(ts, int | float) or isinstance(ts, bool) or not 0 <= ts <= MAX_TIMESTAMP_MS:
        raise WorkloadError(f"{p}:{n}: timestamp {ts!r}: must be milliseconds 0…{MAX_TIMESTAMP_MS:.0f}")
    inp = _int(p, n, obj, "input_length", 1, MAX_INPUT_TOKENS)
    out = _int(p, n, obj, "output_length", 1, MAX_NEW_TOKENS)
    hids = obj.get("hash_ids", [])
    if not isinstance(hids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hids):
        raise WorkloadError(f"{p}:{n}: hash_ids: must be a list of whole numbers")
    blocks = math.ceil(inp / BLOCK_TOKENS)
    if len(hids) > blocks:
        raise WorkloadError(
            f"{p}:{n}: hash_ids: {len(hids)} blocks of {BLOCK_TOKENS} tokens, more than input_length {inp} holds"
        )
    return TraceRecord(
        line=n, timestamp_ms=float(ts), input_length=inp, output_length=out, hash_ids=tuple(hids)
    )


def load_trace(path: str | Path) -> Trace:
    """The trace at `path`, bounded; WorkloadError names the file, the line and the field."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise WorkloadError(f"{p}: {size} bytes, more than a trace may have ({MAX_TRACE_BYTES})")
        f = p.open("rb")
    except FileNotFoundError:
        raise WorkloadError(f"{p}: trace file not found") from None
    except OSError as e:
        raise WorkloadError(f"{p}: cannot read: {e.strerror or e}") from None
    digest = hashlib.sha256()
    out: list[TraceRecord] = []
    tokens = 0
    with f:
        for n, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise WorkloadError(f"{p}:{n}: line longer than {MAX_LINE_BYTES} bytes")
            digest.update(raw)
            try:
                s = raw.decode("utf-8-sig" if n == 1 else "utf-8").strip()
            except UnicodeDecodeError:
                raise WorkloadError(f"{p}:{n}: not UTF-8 text") from None
            if not s or s.startswith("#"):
                continue
            if len(out) >= MAX_PROMPTS:
                raise WorkloadError(f"{p}:{n}: more than {MAX_PROMPTS} requests (the most a run takes)")
            rec = _record(p, n, s)
            tokens += rec.input_length
            if tokens > MAX_TRACE_TOKENS:
                raise WorkloadError(
                    f"{p}:{n}: input_length: the trace's prompts pass {MAX_TRACE_TOKENS} tokens in all "
                    "(replay a part of it: head -n N FILE)"
                )
            out.append(rec)
    if not out:
        raise WorkloadError(f"{p}: no requests in the trace")
    out.sort(key=lambda r: r.timestamp_ms)
    return Trace(path=str(p), sha256=digest.hexdigest(), records=out)


def trace_items(trace: Trace, seed: int = 0) -> list[WorkItem]:
    """One prompt per record, in replay order: its hash ids' blocks, then unique filler to input_length."""
    fill = Filler(seed)
    items: list[WorkItem] = []
    for i, r in enumerate(trace.records):
        parts: list[str] = []
        left = r.input_length
        for h in r.hash_ids:
            take = min(BLOCK_TOKENS, left)
            parts.append(fill.block(f"h{h}", take))
            left -= take
        if left > 0:
            parts.append(fill.block(f"line{r.line}", left))
        items.append(
            WorkItem(
                id=f"trace-{i}-l{r.line}",
                title=f"trace line {r.line}",
                text="".join(parts),
                max_new_tokens=r.output_length,
                raw=True,
            )
        )
    return items

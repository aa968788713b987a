"""SGLang scheduler log lines (Prefill/Decode batch) parsed by key into LogMetrics.

Versions differ: a year or no year in the prefix, a Ray `(SchedulerProcess pid=…)` prefix, `Decode batch [N]`
iteration tags, the older `Decode batch.` form without accept rate, hybrid GDN/Mamba models printing
`#full token`/`full token usage`/`mamba num`/`mamba usage`, and `cap len`/`block accept len` in 0.5.23.
So the line is split into `key: value` pairs and read by key, never by position; unknown keys are ignored.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

_BATCH_RE = re.compile(r"\b(?P<kind>Prefill|Decode) batch(?: ?\[(?P<iter>\d+)\])?[.,:]?")
# configure_logger: `[%(asctime)s{.%(msecs)03d with SGLANG_LOG_MS}{prefix}]`, the prefix being rank tags such
# as " DP0 PP1 ATTN_CP1 MOE_DP0 TP2 EP2" (managers/scheduler.py); older builds printed no year
_PREFIX_RE = re.compile(
    r"\[(?:(?P<year>\d{4})-)?(?P<time>\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
    r"(?P<ranks>(?:\s+[A-Z][A-Z_]*?\d+)*)\]"
)
_RAY_RE = re.compile(r"\((?P<proc>\w+) pid=(?P<pid>\d+)(?:,\s*ip=(?P<ip>[^)\s]+))?\)")
_RANK_RE = re.compile(r"([A-Z][A-Z_]*?)(\d+)")

# log key -> (field, type)
_KEYS: dict[str, tuple[str, type]] = {
    "#running-req": ("running_req", int),
    "#queue-req": ("queue_req", int),
    "#token": ("num_token", int),
    "token usage": ("token_usage", float),
    "#full token": ("full_token", int),
    "full token usage": ("full_token_usage", float),
    "#swa token": ("swa_token", int),
    "swa token usage": ("swa_token_usage", float),
    "mamba num": ("mamba_num", int),
    "mamba usage": ("mamba_usage", float),
    "accept len": ("accept_len", float),
    "accept rate": ("accept_rate", float),
    "cap len": ("cap_len", float),
    "block accept len": ("block_accept_len", float),
    "gen throughput (token/s)": ("gen_throughput", float),
    "input throughput (token/s)": ("input_throughput", float),
    "#new-seq": ("new_seq", int),
    "#new-token": ("new_token", int),
    "#cached-token": ("cached_token", int),
    "#pending-token": ("pending_token", int),
    "cuda graph": ("cuda_graph", bool),
    "cpu graph": ("cuda_graph", bool),
    "npu graph": ("cuda_graph", bool),
    "spec algo": ("spec_algo", str),  # added by patches/decode-log-spec-algo
}


class LogMetrics(BaseModel):
    """One Prefill or Decode batch line, by key; absent keys are None."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["prefill", "decode"]
    iteration: int | None = None
    timestamp: str | None = None  # as printed: "2026-11-29 18:07:27" or "11-29 18:07:27"
    dp_rank: int | None = None
    tp_rank: int | None = None
    ranks: dict[str, int] = {}  # every rank tag of the prefix: DP, PP, ATTN_CP, MOE_DP, TP, EP
    ray_pid: int | None = None
    running_req: int | None = None
    queue_req: int | None = None
    num_token: int | None = None
    token_usage: float | None = None
    full_token: int | None = None
    full_token_usage: float | None = None
    swa_token: int | None = None
    swa_token_usage: float | None = None
    mamba_num: int | None = None
    mamba_usage: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    cap_len: float | None = None
    block_accept_len: float | None = None
    gen_throughput: float | None = None
    input_throughput: float | None = None
    new_seq: int | None = None
    new_token: int | None = None
    cached_token: int | None = None
    pending_token: int | None = None
    cuda_graph: bool | None = None
    spec_algo: str | None = None

    @property
    def usage(self) -> float | None:
        """KV usage whatever the model kind, as SGLang's own `token_usage` gauge is: the fullest pool (the full
        attention, SWA and mamba pools of a hybrid model; PoolStats.get_max_pool_usage in 0.5.23)."""
        vals = [
            v
            for v in (self.token_usage, self.full_token_usage, self.swa_token_usage, self.mamba_usage)
            if v is not None
        ]
        return max(vals) if vals else None


def _convert(raw: str, typ: type) -> object | None:
    raw = raw.strip()
    try:
        if typ is bool:
            return raw.lower() in ("true", "1", "yes")
        if typ is int:
            return int(raw)
        if typ is float:
            return float(raw)
        return raw or None
    except ValueError:
        return None


def parse_line(line: str) -> LogMetrics | None:
    """LogMetrics for a Prefill/Decode batch line, None for any other line."""
    m = _BATCH_RE.search(line)
    if not m:
        return None
    data: dict[str, object] = {"kind": m.group("kind").lower()}
    if m.group("iter"):
        data["iteration"] = int(m.group("iter"))
    head = line[: m.start()]
    pm = _PREFIX_RE.search(head)
    if pm:
        data["timestamp"] = (pm.group("year") + "-" if pm.group("year") else "") + pm.group("time")
        ranks = {rk: int(rv) for rk, rv in _RANK_RE.findall(pm.group("ranks") or "")}
        data["ranks"] = ranks
        if "DP" in ranks:
            data["dp_rank"] = ranks["DP"]
        if "TP" in ranks:
            data["tp_rank"] = ranks["TP"]
    rm = _RAY_RE.search(head)
    if rm:
        data["ray_pid"] = int(rm.group("pid"))
    found = False
    for part in line[m.end() :].split(","):
        key, sep, value = part.partition(":")
        if not sep:
            continue
        spec = _KEYS.get(key.strip())
        if spec is None:
            continue
        v = _convert(value, spec[1])
        if v is not None:
            data[spec[0]] = v
            found = True
    if not found:
        return None
    return LogMetrics.model_validate(data)

"""The bounds of every count a user gives a benchmark, in one place, and the read limits' options.

A count past its bound is a usage error that names the option and the bound, before anything runs: an
unbounded count (a 1 M-prompt file, `--sessions 100000`, a `max_new_tokens` above 2^63) otherwise ends as
a traceback or an out-of-memory kill mid-run, and loses what was measured. The prompt loader
(bench/prompts.py) and the load-shape parser (bench/load.py: levels, concurrency, rates) check theirs with
these numbers; `bench_args_problem` checks the `--run-bench` options.
"""

from __future__ import annotations

import os
import re

from pydantic import ValidationError

from ddtree_tui.bench.stream import READ_TICK_ENV, StreamLimits, set_default_limits

MAX_PROMPTS = 100_000  # prompts in a set or FILE.jsonl (a run keeps every result in memory)
MAX_NEW_TOKENS = 1_000_000  # a prompt's max_new_tokens, as BenchRequest's --max-new-tokens
MAX_LEVELS = 64  # a ladder's levels (bench/load.py)
MAX_RATE = 100000.0  # requests/s of a rate or poisson shape
MAX_CONCURRENCY = 4096  # requests in flight
MAX_SESSIONS = MAX_CONCURRENCY  # agentic sessions at once: one connection each, like --concurrency
MAX_TURNS = 1000  # turns of an agentic session (each carries the whole history so far)
MAX_REQUESTS = 1_000_000  # --requests per service per level
MAX_RUN_REQUESTS = 1_000_000  # counted requests of a plain run: prompts × repeats × services (all kept)
MAX_THINK_TIME_S = 24 * 3600.0
MAX_READ_TICK_MS = 1000.0  # --read-tick-ms: a stream read less often than this would hold its bytes too long

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_LEVELS",
    "MAX_NEW_TOKENS",
    "MAX_PROMPTS",
    "MAX_RATE",
    "MAX_REQUESTS",
    "MAX_RUN_REQUESTS",
    "MAX_SESSIONS",
    "MAX_TURNS",
    "bench_args_problem",
    "limits_of",
    "parse_size",
    "plan_problem",
]

_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str, option: str) -> int:
    """A byte count: 1048576, 64K, 16M, 1G (powers of 1024; KiB, MB and the like read the same)."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"{option} {text!r}: expected a size in bytes, e.g. 16M, 512K or 1G")
    return int(m.group(1)) * _UNITS[(m.group(2) or "")[:1].lower()]


def limits_of(ns: object) -> StreamLimits | None:
    """The read limits `--max-line-bytes` / `--max-response-bytes` ask for; None when neither is given.
    ValueError names the option and its allowed range."""
    fields: dict[str, int] = {}
    for option, name in (
        ("--max-line-bytes", "max_line_bytes"),
        ("--max-response-bytes", "max_response_bytes"),
    ):
        text = getattr(ns, name, None)
        if text is not None:
            fields[name] = parse_size(str(text), option)
    if not fields:
        return None
    try:
        return StreamLimits(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err.get("loc", ("?",))[0])
        msg = str(err.get("msg", "out of range")).replace("Input should be", "must be")
        raise ValueError(f"--{name.replace('_', '-')} {fields.get(name)}: {msg} bytes") from None


def plan_problem(prompts: int, repeats: int, services: int) -> str | None:
    """A plain run's size past MAX_RUN_REQUESTS (its plan and every result are held in memory), in words."""
    total = prompts * repeats * max(1, services)
    if total <= MAX_RUN_REQUESTS:
        return None
    return (
        f"{prompts} prompts × {repeats} repeats × {services} service(s) = {total} requests: at most "
        f"{MAX_RUN_REQUESTS} a run (fewer prompts or --repeats)"
    )


def _count(ns: object, name: str, lo: int, hi: int) -> str | None:
    v = getattr(ns, name, None)
    if v is None or lo <= v <= hi:
        return None
    return f"--{name.replace('_', '-')} {v}: must be a whole number {lo}…{hi}"


def bench_args_problem(ns: object) -> str | None:
    """What is out of bounds in the `--run-bench` options (the first problem, in words), else None."""
    for name, lo, hi in (
        ("sessions", 1, MAX_SESSIONS),
        ("turns", 1, MAX_TURNS),
        ("requests", 1, MAX_REQUESTS),
        ("max_new_tokens", 1, MAX_NEW_TOKENS),
    ):
        problem = _count(ns, name, lo, hi)
        if problem:
            return problem
    think = getattr(ns, "think_time", None)
    if think is not None and not 0 <= think <= MAX_THINK_TIME_S:
        return f"--think-time {think:g}: must be 0…{MAX_THINK_TIME_S:g} seconds"
    tick = getattr(ns, "read_tick_ms", None)
    if tick is not None and not 0 <= tick <= MAX_READ_TICK_MS:
        return f"--read-tick-ms {tick:g}: must be 0…{MAX_READ_TICK_MS:g} ms (0: a read per readable socket)"
    try:
        limits_of(ns)
    except ValueError as e:
        return str(e)
    return None


def use_limits(limits: StreamLimits) -> None:
    """The read limits for this process and the worker processes it starts (a face sets them here, never
    in the client's own module: faces do not import the client)."""
    set_default_limits(limits)


def use_read_tick(ms: float) -> None:
    """`--read-tick-ms` for this process and the worker processes it starts (they inherit the environment)."""
    os.environ[READ_TICK_ENV] = f"{ms:g}"

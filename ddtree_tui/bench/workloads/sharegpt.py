"""ShareGPT-format JSON files, the public format of `bench_serving --dataset-name sharegpt`:

    [{"id": "...", "conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}, ...]

    --prompts sharegpt:FILE            the first human turn of each entry is a prompt (--max-new-tokens out)
    --prompts sharegpt:FILE,gpt-len    ... and the gpt turn after it sets that prompt's output length

The gpt turn's length is counted as characters / 4 (no tokenizer here: the simulator's count, about a real
tokenizer's for English), at least 1. Entries with no human turn, or (gpt-len) no gpt turn after it, are
skipped, as SGLang skips conversations shorter than two turns. The prompts are shuffled by the run's --seed.

Read with bounds, never whole: the array is decoded one entry at a time (an entry at most MAX_ENTRY_BYTES),
and reading stops after MAX_PROMPTS usable entries, so the public 600 MB file costs one entry's memory at a
time. A bad entry is an error naming the file, the line where the entry starts and the field.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddtree_tui.bench.bounds import MAX_NEW_TOKENS, MAX_PROMPTS
from ddtree_tui.bench.workloads.base import WorkItem, WorkloadError

MAX_ENTRY_BYTES = 4 * 1024 * 1024  # one conversation
READ_CHUNK = 256 * 1024
GPT_LEN = "gpt-len"


def parse_spec(spec: str) -> tuple[Path, bool]:
    """`sharegpt:FILE[,gpt-len]` → (the file, whether the gpt turn sets the output length)."""
    body = spec.partition(":")[2].strip()
    path, sep, flag = body.rpartition(",")
    if sep and flag.strip() == GPT_LEN:
        body = path
    if not body:
        raise WorkloadError(f"--prompts {spec!r}: expected sharegpt:FILE[,{GPT_LEN}]")
    return Path(body), bool(sep and flag.strip() == GPT_LEN)


def _entries(p: Path) -> Iterator[tuple[int, int, Any]]:
    """(index, line, decoded entry) of the file's top-level array, one at a time."""
    dec = json.JSONDecoder()
    try:
        f = p.open(encoding="utf-8-sig")  # a byte-order mark is not part of the JSON
    except FileNotFoundError:
        raise WorkloadError(f"{p}: ShareGPT file not found") from None
    except OSError as e:
        raise WorkloadError(f"{p}: cannot read: {e.strerror or e}") from None
    with f:
        buf, line, pos, started, index, eof = "", 1, 0, False, 0, False

        def more() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            try:
                chunk = f.read(READ_CHUNK)
            except (OSError, UnicodeDecodeError) as e:
                raise WorkloadError(f"{p}:{line}: cannot read: {e}") from None
            if not chunk:
                eof = True
                return False
            buf = buf[pos:] + chunk
            pos = 0
            return True

        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                if buf[pos] == ",":
                    if not started:
                        raise WorkloadError(f"{p}:{line}: expected a JSON array of conversations")
                line += buf[pos] == "\n"
                pos += 1
            if pos >= len(buf):
                if not more():
                    raise WorkloadError(f"{p}:{line}: the JSON array is not closed")
                continue
            ch = buf[pos]
            if not started:
                if ch != "[":
                    raise WorkloadError(f"{p}:{line}: expected a JSON array of conversations")
                started, pos = True, pos + 1
                continue
            if ch == "]":
                return
            while True:
                try:
                    obj, end = dec.raw_decode(buf, pos)
                    break
                except json.JSONDecodeError as e:
                    if len(buf) - pos > MAX_ENTRY_BYTES:
                        raise WorkloadError(
                            f"{p}:{line}: entry {index}: longer than {MAX_ENTRY_BYTES} bytes or not JSON"
                        ) from None
                    if not more():
                        raise WorkloadError(f"{p}:{line}: entry {index}: not JSON: {e.msg}") from None
            yield index, line, obj
            line += buf.count("\n", pos, end)
            pos, index = end, index + 1


def _turn(p: Path, line: int, idx: int, j: int, m: Any) -> tuple[str, str]:
    if not isinstance(m, dict):
        raise WorkloadError(f"{p}:{line}: entry {idx}: conversations[{j}]: not an object")
    who, value = m.get("from", m.get("role")), m.get("value", m.get("content"))
    if not isinstance(who, str) or not isinstance(value, str):
        raise WorkloadError(
            f"{p}:{line}: entry {idx}: conversations[{j}]: expected string 'from' and 'value'"
        )
    return who.lower(), value


def sharegpt_items(spec: str, seed: int = 0, limit: int = MAX_PROMPTS) -> list[WorkItem]:
    """The prompts of `sharegpt:FILE[,gpt-len]`; WorkloadError names the file, line and field."""
    p, gpt_len = parse_spec(spec)
    out: list[WorkItem] = []
    for idx, line, obj in _entries(p):
        if not isinstance(obj, dict):
            raise WorkloadError(f"{p}:{line}: entry {idx}: expected an object with 'conversations'")
        conv = obj.get("conversations")
        if not isinstance(conv, list):
            raise WorkloadError(f"{p}:{line}: entry {idx}: 'conversations' must be a list")
        turns = [_turn(p, line, idx, j, m) for j, m in enumerate(conv)]
        k = next((j for j, (who, _) in enumerate(turns) if who in ("human", "user")), None)
        if k is None:
            continue
        out_len: int | None = None
        if gpt_len:
            reply = next((v for who, v in turns[k + 1 :] if who in ("gpt", "assistant")), None)
            if reply is None:
                continue
            out_len = min(MAX_NEW_TOKENS, max(1, math.ceil(len(reply) / 4)))
        raw_id = obj.get("id")
        pid = f"{raw_id if isinstance(raw_id, str | int) else 'entry'}-{idx}"
        out.append(WorkItem(id=pid, title=f"sharegpt entry {idx}", text=turns[k][1], max_new_tokens=out_len))
        if len(out) >= limit:
            break
    if not out:
        raise WorkloadError(
            f"{p}: no usable conversation (a human turn{', then a gpt turn' if gpt_len else ''})"
        )
    random.Random(f"sharegpt:{seed}").shuffle(out)
    return out

"""The words of a streamed reply, before any timing: one server-sent-event line as JSON, [DONE] or junk,
and the message and code of an error body in the shapes SGLang, OpenAI and FastAPI send. Pure; split from
the measured client (client.py) so each stays small."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass
class SSEItem:
    kind: str  # "json" | "done" | "bad"
    data: Any = None


def parse_sse_line(line: str | bytes) -> SSEItem | None:
    """One line of a server-sent-event stream; None for blank lines, comments and non-data fields."""
    if isinstance(line, str):
        line = line.encode("utf-8", "surrogateescape")
    if not line or line.startswith(b":"):
        return None
    if not line.startswith(b"data:"):
        if line.startswith((b"event:", b"id:", b"retry:")):
            return None
        return SSEItem("bad", line.decode("utf-8", "replace"))
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return SSEItem("done")
    if not payload:
        return None
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return SSEItem("bad", payload.decode("utf-8", "replace"))
    if not isinstance(obj, dict):
        return SSEItem("bad", payload.decode("utf-8", "replace"))
    return SSEItem("json", obj)


def short(s: str, n: int = 120) -> str:
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 1] + "…"


def err_message(obj: Mapping[str, object]) -> str:
    """The message of an error body: OpenAI/SGLang `{"error": {...}}` or `{"error": "..."}`, FastAPI
    `{"detail": "..."}` or a validation `{"detail": [{"loc": ..., "msg": ...}]}`, else the body itself."""
    e = obj.get("error")
    if isinstance(e, dict):
        return str(e.get("message") or e.get("detail") or json.dumps(e))
    if e is not None:
        return str(e)
    d = obj.get("detail")
    if isinstance(d, list):
        parts = []
        for item in d[:5]:
            if isinstance(item, dict):
                loc = ".".join(str(x) for x in item.get("loc") or [])
                parts.append(f"{loc}: {item.get('msg')}" if loc else str(item.get("msg")))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    if d is not None:
        return str(d if not isinstance(d, dict) else d.get("message") or json.dumps(d))
    if obj.get("message"):
        return str(obj["message"])
    return json.dumps(obj)[:300]


def err_code(obj: Mapping[str, object]) -> int | None:
    e = obj.get("error")
    code = e.get("code") if isinstance(e, dict) else obj.get("code")
    return code if isinstance(code, int) and 100 <= code <= 599 else None


def http_error_message(raw: str) -> str:
    """The words of a non-200 body: the error object's message ({"error"} or {"detail"}), else the text."""
    text = raw.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            return text or "(empty body)"
        if isinstance(obj, dict):
            return err_message(obj)
    return text or "(empty body)"


# --- per-request speculative details (issue 26) ---------------------------------------------------------------
# The keys of SGLang 0.5.23's per-request spec metrics: `meta_info` of /generate's final chunk
# (managers/tokenizer_manager.py _calculate_spec_decoding_metrics) and, on the OpenAI APIs with
# `"return_spec_tokens_details": true`, `sglext.spec_tokens_details` (entrypoints/openai/protocol.py
# SpecTokensDetails), sent in a chunk of its own with `choices: []` after the finish chunk.
def sglext_spec(obj: Mapping[str, object]) -> Mapping[str, object] | None:
    """`sglext.spec_tokens_details` of an OpenAI chunk: one object (n = 1) or a list (n > 1: the first, the
    one choice the bench asks for); None when the chunk has none."""
    ext = obj.get("sglext")
    if not isinstance(ext, dict):
        return None
    d = ext.get("spec_tokens_details")
    if isinstance(d, list):
        d = d[0] if d else None
    return d if isinstance(d, dict) else None

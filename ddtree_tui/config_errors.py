"""Where in a profile's TOML text a validation error is, and how to say it.

Pydantic reports a location like ('service', 1, 'port'); a person editing the file needs the line. Apart from
config.py so the models stay readable: nothing here knows the models, only TOML text and error details.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic_core import ErrorDetails

_TABLE_RE = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
_KEY_RE = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=")


def _key_path(raw: str) -> list[str]:
    """`a.b = 1` (a dotted key) is the path [a, b]."""
    return [part.strip().strip("\"'") for part in raw.split(".")]


def grep_key(text: str, loc: Sequence[int | str]) -> int | None:
    """Last resort for keys inside inline tables (`service = [{...}]`): the first line that sets the key."""
    key = next((k for k in reversed(loc) if isinstance(k, str)), None)
    if not key:
        return None
    pat = re.compile(rf"(^|[\s{{,.]){re.escape(key)}\s*=")
    return next((n for n, line in enumerate(text.splitlines(), start=1) if pat.search(line)), None)


def locate_line(text: str, loc: Sequence[int | str]) -> int | None:
    """Best line for a pydantic error location like ('service', 1, 'port') in TOML text."""
    lines = text.splitlines()
    keys = [k for k in loc if isinstance(k, str)]
    index = next((k for k in loc if isinstance(k, int)), None)
    table: str = ""
    array_count: dict[str, int] = {}
    best: int | None = None
    target_table = keys[0] if index is not None and keys else None
    for n, line in enumerate(lines, start=1):
        m = _TABLE_RE.match(line)
        if m:
            table = m.group(2).replace('"', "").replace("'", "").strip()
            if m.group(1) == "[[":
                array_count[table] = array_count.get(table, -1) + 1
            if target_table and table == target_table and array_count.get(table) == index:
                best = best or n
                inner = keys[1:]
                if not inner:
                    return n
            elif (
                target_table
                and table.split(".")[0] == target_table
                and array_count.get(target_table) == index
                and table.split(".")[1:] == keys[1:]
            ):
                return n  # [service.env] for ('service', 0, 'env')
            elif not target_table and keys and table in (".".join(keys[:-1]), ".".join(keys)):
                best = best or n
            continue
        km = _KEY_RE.match(line)
        if not km:
            continue
        kpath = _key_path(km.group(1))
        if target_table:
            in_target = table.split(".")[0] == target_table and array_count.get(target_table) == index
            inner = keys[1:]
            if in_target and inner:
                sub = table.split(".")[1:]
                full = sub + kpath
                if full == inner[: len(full)] or (not sub and kpath[0] == inner[0]):
                    return n
        else:
            path = ([*table.split(".")] if table else []) + kpath
            if keys and path == keys[: len(path)]:
                return n
    return best


def field_name(loc: Sequence[int | str]) -> str:
    """('service', 0, 'port') as `service[0].port`, the way the profile's author writes it."""
    out = ""
    for k in loc:
        if isinstance(k, int):
            out += f"[{k}]"
        else:
            out += ("." if out else "") + str(k)
    return out


def explain(err: ErrorDetails) -> str:
    """One line for a validation error: what was expected and, for a plain value, what was given."""
    typ = err.get("type", "")
    if typ == "extra_forbidden":
        return "unknown key (check the spelling; see hostprofiles/README.md for the fields)"
    if typ == "missing":
        return "is required but missing"
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    inp = err.get("input")
    if typ not in ("model_type",) and not isinstance(inp, dict | list):
        msg += f" (got {inp!r})"
    return msg

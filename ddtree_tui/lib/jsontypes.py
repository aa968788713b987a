"""Parsed JSON as a type: a signature that takes or returns what `json.loads` made says so, instead of `Any`
(issue 24: no `Any` across a package boundary).

`JsonValue` is pydantic's recursive alias (object, array, string, number, bool, null); a reader narrows it
(isinstance, or a pydantic model) before it trusts a shape. `JsonObject` is one JSON object, the usual top.
"""

from __future__ import annotations

from typing import TypeAlias

from pydantic import JsonValue

JsonObject: TypeAlias = dict[str, JsonValue]

__all__ = ["JsonObject", "JsonValue"]

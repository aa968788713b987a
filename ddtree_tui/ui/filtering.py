"""The `/` filter's grammar, one for every table (k9s): the text is a case-insensitive regular expression
(plain words are substrings, since a word is a regex that matches itself); text that is not a valid regex is
taken as a literal substring; a leading `!` inverts (rows that do NOT match). Pure, so views.py and the
panes share it and it is unit-tested without an app."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class RowFilter:
    """A parsed filter: `pattern` (None: everything matches), `invert` for a leading `!`, and `literal` when
    the text was not a valid regex (so it is matched as a plain substring)."""

    text: str
    pattern: re.Pattern[str] | None
    invert: bool
    literal: bool

    def matches(self, *fields: str | None) -> bool:
        """True when the row (its fields' text) is kept by the filter."""
        if self.pattern is None:
            return True
        hit = any(self.pattern.search(x) for x in fields if x)
        return hit != self.invert

    def label(self) -> str:
        """How the pane title names the filter: `/dflash`, `/!stopped`, `/a(b (substring)`."""
        return f"/{self.text}" + (" (substring)" if self.literal else "")


@lru_cache(maxsize=64)
def parse_filter(text: str) -> RowFilter:
    """`!` first inverts; the rest is a regex if it compiles, else a literal substring; blank matches all."""
    invert = text.startswith("!")
    body = text[1:] if invert else text
    if not body:
        return RowFilter(text, None, False, False)
    try:
        return RowFilter(text, re.compile(body, re.IGNORECASE), invert, False)
    except re.error:
        return RowFilter(text, re.compile(re.escape(body), re.IGNORECASE), invert, True)


def matches(filter_text: str, *fields: str | None) -> bool:
    """The filter over a row's fields (see the module docstring)."""
    return not filter_text or parse_filter(filter_text).matches(*fields)


def filter_label(filter_text: str) -> str:
    return parse_filter(filter_text).label() if filter_text else ""

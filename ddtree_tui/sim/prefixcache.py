"""The simulator's radix prefix cache, by pages: a prompt's hit is its longest prefix of whole pages
(CACHE_PAGE_CHARS characters) that some earlier prompt started with, or a whole earlier prompt that it
starts with, as SGLang's RadixAttention reuses a shared system prompt or a conversation's history.

Each page is keyed by a digest chained over the pages before it, so a lookup costs one pass over the prompt
(a trace replay sends thousands of tokens a request; comparing against every cached prompt did not scale).
Bounded by MAX_PAGES, least recently used first; a prompt's pages are touched deepest first, so the shared
head of many prompts is the last to go (a radix tree evicts its leaves first).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

MAX_PAGES = 1 << 16


class PrefixCache:
    def __init__(self, page_chars: int, max_pages: int = MAX_PAGES) -> None:
        self.page = page_chars
        self.max_pages = max_pages
        self._pages: OrderedDict[bytes, None] = OrderedDict()
        self._tails: dict[bytes, set[str]] = {}  # a cached prompt's last partial page, under its last key

    def clear(self) -> None:
        self._pages.clear()
        self._tails.clear()

    def _keys(self, prompt: str) -> list[bytes]:
        """The chained key of each whole page of `prompt` (index k: pages 0..k)."""
        out: list[bytes] = []
        prev = b""
        for i in range(0, len(prompt) - len(prompt) % self.page, self.page):
            prev = hashlib.blake2b(prev + prompt[i : i + self.page].encode(), digest_size=16).digest()
            out.append(prev)
        return out

    def hit_and_insert(self, prompt: str) -> int:
        """Characters of `prompt` found cached; the prompt is cached afterwards."""
        keys = self._keys(prompt)
        k = 0
        while k < len(keys) and keys[k] in self._pages:
            k += 1
        best = k * self.page
        # a whole earlier prompt (its partial last page too) that this one starts with
        for depth in range(k + 1):
            tails = self._tails.get(keys[depth - 1] if depth else b"")
            if tails:
                rest = prompt[depth * self.page :]
                best = max([best, *(depth * self.page + len(t) for t in tails if rest.startswith(t))])
        for key in reversed(keys):
            self._pages[key] = None
            self._pages.move_to_end(key)
        tail = prompt[len(keys) * self.page :]
        if tail:
            self._tails.setdefault(keys[-1] if keys else b"", set()).add(tail)
        while len(self._pages) > self.max_pages:
            old, _ = self._pages.popitem(last=False)
            self._tails.pop(old, None)
        return best

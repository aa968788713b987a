"""Masking this host's secrets in text that comes from the host (log lines, exit tails, launch refusals).

SGLang prints its server_args, `--api-key` included, and a crash tail may echo the environment; every
line a ServiceManager passes on goes through here first. The secrets are the services' own (their launch
lines say which), gathered again only when a spec changes, since this runs on every log line.
"""

from __future__ import annotations

import contextlib

from ddtree_tui.config import redact_text
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.services.svcstate import ServiceBook

__all__ = ["Redactor"]


class Redactor:
    """Masks the secret values of the book's services."""

    def __init__(self, book: ServiceBook) -> None:
        self._book = book
        self._cache: tuple[tuple[int, ...], set[str]] | None = None

    def secrets(self) -> set[str]:
        """Every secret value of this host's services (cached until a spec changes)."""
        profile = self._book.profile
        svcs = list(self._book)
        key = (id(profile), *(id(s.spec) for s in svcs))
        if self._cache is None or self._cache[0] != key:
            out: set[str] = set()
            for svc in svcs:
                with contextlib.suppress(Exception):
                    out |= build_launch(profile, svc.spec).secrets()
            self._cache = (key, out)
        return self._cache[1]

    def text(self, text: str) -> str:
        return redact_text(text, self.secrets()) if text else text

    def lines(self, lines: list[str] | None) -> list[str]:
        secrets = self.secrets()
        return [redact_text(str(x), secrets) for x in lines or []]

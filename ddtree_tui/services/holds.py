"""Holds: a sweep owns a service while it runs, and launch / kill / restart / move by anyone else are refused.

One `Holds` a ServiceManager, in memory (the fleet adds a file lock so other ddtree-tui processes see the
hold too). A refusal is an ActionResult that says who holds the service and what to do.
"""

from __future__ import annotations

from ddtree_tui.model.snapshot import ActionResult
from ddtree_tui.services.svcstate import ServiceBook, ServiceHeld

__all__ = ["Holds"]


class Holds:
    """Who holds which service of one host."""

    def __init__(self, book: ServiceBook) -> None:
        self._book = book
        self._owner: dict[str, str] = {}  # service -> who holds it

    def hold(self, name: str, owner: str) -> None:
        """Reserve `name` for `owner`; ServiceHeld when someone else holds it."""
        self._book.get(name)
        cur = self._owner.get(name)
        if cur is not None and cur != owner:
            raise ServiceHeld(f"{self._book.host}/{name} is held by {cur}")
        self._owner[name] = owner

    def release(self, name: str, owner: str) -> None:
        if self._owner.get(name) == owner:
            del self._owner[name]

    def held_by(self, name: str) -> str | None:
        return self._owner.get(name)

    def refusal(self, name: str, verb: str, holder: str | None) -> ActionResult | None:
        """The ActionResult refusing `verb` of `name` when someone other than `holder` holds it; else None."""
        owner = self._owner.get(name)
        if owner is None or owner == holder:
            return None
        return ActionResult(
            ok=False,
            message=f"refused to {verb} {self._book.host}/{name}: it is held by {owner}; nothing was done",
            status=self._book.get(name).status,
            suggestion="wait for the sweep to finish, or stop it (it puts the service back as the profile has it)",
        )

"""The fleet: the door into the core (`Fleet`, in core.py) and the desks it composes (hosts, services,
benching, todos, snapshot). `from ddtree_tui.fleet import Fleet` is how the faces open it."""

from ddtree_tui.fleet.core import Fleet, FleetOptions, collect_snapshot

__all__ = ["Fleet", "FleetOptions", "collect_snapshot"]

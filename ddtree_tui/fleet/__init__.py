"""The fleet: the door into the core (`Fleet`, in core.py) and the desks it composes (hosts, services,
benching, todos, snapshot). `from ddtree_tui.fleet import Fleet` is how the faces open it.

The names below are loaded when first asked for (PEP 562 `__getattr__`): importing a light module of this
package (`fleet.starting`, `fleet.protocol`) must not import the core and its engines, aiohttp among them,
which is most of the TUI's import time before its first frame (issue 28)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtree_tui.lib.lazyexports import lazy_getattr

if TYPE_CHECKING:
    from ddtree_tui.fleet.core import Fleet, FleetOptions
    from ddtree_tui.fleet.oneshot import collect_snapshot
    from ddtree_tui.fleet.services import launch_line
    from ddtree_tui.services.holdfiles import ServiceHeld  # raised by Fleet.hold: someone else holds it
    from ddtree_tui.transport import TransportError  # raised when a host cannot be reached

_WHERE = {
    "Fleet": "ddtree_tui.fleet.core",
    "FleetOptions": "ddtree_tui.fleet.core",
    "collect_snapshot": "ddtree_tui.fleet.oneshot",
    "launch_line": "ddtree_tui.fleet.services",
    "ServiceHeld": "ddtree_tui.services.holdfiles",
    "TransportError": "ddtree_tui.transport",
}


# each name imported from its module the first time it is named
__getattr__ = lazy_getattr(globals(), _WHERE, __name__)


__all__ = ["Fleet", "FleetOptions", "ServiceHeld", "TransportError", "collect_snapshot", "launch_line"]

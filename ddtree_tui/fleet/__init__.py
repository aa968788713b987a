"""The fleet: the door into the core (`Fleet`, in core.py) and the desks it composes (hosts, services,
benching, todos, snapshot). `from ddtree_tui.fleet import Fleet` is how the faces open it."""

from ddtree_tui.fleet.core import Fleet, FleetOptions
from ddtree_tui.fleet.oneshot import collect_snapshot
from ddtree_tui.fleet.services import launch_line
from ddtree_tui.services.lifecycle import ServiceHeld  # raised by Fleet.hold: someone else holds the service
from ddtree_tui.transport import TransportError  # raised when a host cannot be reached

__all__ = ["Fleet", "FleetOptions", "ServiceHeld", "TransportError", "collect_snapshot", "launch_line"]

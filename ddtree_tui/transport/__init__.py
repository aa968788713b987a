"""How commands reach a host: LocalTransport (this machine) or SshTransport (asyncssh), one interface."""

from __future__ import annotations

from ddtree_tui.config import HostProfile
from ddtree_tui.transport.base import RunResult, Transport, TransportError, quote_argv

__all__ = ["RunResult", "Transport", "TransportError", "make_transport", "quote_argv"]


def make_transport(profile: HostProfile) -> Transport:
    """The transport a profile asks for: local for address "local", ssh otherwise."""
    if profile.is_local:
        from ddtree_tui.transport.local import LocalTransport

        return LocalTransport(profile)
    from ddtree_tui.transport.ssh import SshTransport

    return SshTransport(profile)

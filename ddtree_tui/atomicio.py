"""Moved to `ddtree_tui.remote.atomicio` (it runs on hosts too); re-exported here for code not yet updated."""

from ddtree_tui.remote.atomicio import UntrustedLinkError, is_special, resolve_trusted, write_file

__all__ = ["UntrustedLinkError", "is_special", "resolve_trusted", "write_file"]

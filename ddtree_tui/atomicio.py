"""Moved to `ddtree_tui.remote.atomicio` (it runs on hosts too); re-exported here for code not yet updated."""

from ddtree_tui.remote.atomicio import is_special, write_file

__all__ = ["is_special", "write_file"]

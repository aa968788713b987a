"""The benchmark's defaults that the CLI's parser shows before any request is built: a module of constants
only, so parsing `ddtree-tui sim ...` or `status` does not build the request and result models of
`bench/models.py` (which re-exports these; issue 24: the parser was a quarter of a second of every start)."""

from __future__ import annotations

DEFAULT_MAX_NEW_TOKENS = 256  # the README's; the TUI dialog, --run-bench and the collector alike

"""The benchmark's defaults that the CLI's parser shows before any request is built: a module of constants
only, so parsing `ddtree-tui sim ...` or `status` does not build the request and result models of
`bench/models.py` (which re-exports these; issue 24: the parser was a quarter of a second of every start)."""

from __future__ import annotations

DEFAULT_MAX_NEW_TOKENS = 256  # the README's; the TUI dialog, --run-bench and the collector alike
# a warm-up request asks for at most this many new tokens (0: as many as a measured one). What a warm-up is
# for (the level's streams in flight at once, connections open, the server's batch of that width decoding,
# the chunk rate measured) needs no whole answer, as SGLang's own bench_one_batch warms up on min(32, output
# length) tokens; a whole one cost as much as the measured part at c=64 (issue 26: side by side on 2 and 16
# cores, cutting it left TTFT and e2e errors where they were, or lower, for a third less client CPU)
DEFAULT_WARMUP_TOKENS = 64

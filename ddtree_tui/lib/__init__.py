"""Generic helpers with no knowledge of ddtree-tui: event fan-out, backoff, paths."""

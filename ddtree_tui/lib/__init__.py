"""Generic helpers the whole package may use: they import nothing of ddtree_tui's own."""

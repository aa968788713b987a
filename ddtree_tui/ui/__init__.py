"""The Textual face: the app, its screens and widgets (the core never imports this package).

Textual draws a screen's pending changes on a timer of 1/TEXTUAL_FPS (default 60): a key handled just after
a frame waits up to 16.7 ms for the next one, which at 16 hosts was half of key -> paint's p95 wall time
beyond its CPU (issue 28: p95 34.2 ms wall against 18.1 ms CPU, idle). 120 halves that wait; frames are still
drawn only when something changed. Set before Textual is first imported (its constants are read then); a
user's own TEXTUAL_FPS is kept."""

import os

os.environ.setdefault("TEXTUAL_FPS", "120")

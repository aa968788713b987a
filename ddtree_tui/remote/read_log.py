"""The last N lines of a log file, as one JSON line.

Sent as source with its helpers (`ddtree_tui.remote.source('read_log')`); standard library only.
Request (stdin, JSON): {"path": log file, "lines": N}. Reply: {"lines": [...]} (empty when there is no file).
"""

from __future__ import annotations

import json
import sys

from ddtree_tui.remote.hostlib import tail

cfg = json.load(sys.stdin)
sys.stdout.write(json.dumps({"lines": tail(cfg["path"], int(cfg["lines"]))}) + "\n")

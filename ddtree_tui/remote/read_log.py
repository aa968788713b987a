"""The last N lines of a log file, as one JSON line.

Sent as source with its helpers (`ddtree_tui.remote.source('read_log')`); standard library only.
"""

from __future__ import annotations

import json
import sys

from ddtree_tui.remote.hostlib import tail

sys.stdout.write(json.dumps(tail(sys.argv[1], int(sys.argv[2]))) + "\n")

"""The text of files on the host (patches). stdin: a JSON list of paths; one JSON line: {path: text or null}."""

import json
import sys
from typing import Dict, Optional

out: Dict[str, Optional[str]] = {}
for p in json.loads(sys.stdin.read()):
    try:
        with open(p, "rb") as f:
            out[p] = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        out[p] = None
print(json.dumps(out))

"""Where a package is installed on the host and its distribution version (patches).

stdin: {"package": NAME, "distribution": DIST}; one JSON line: {"dir", "version", "error"?}.
"""

import importlib.util
import json
import os
import sys
from typing import Dict, Optional

cfg = json.loads(sys.stdin.read())
name, dist = cfg["package"], cfg["distribution"]
out: Dict[str, Optional[str]] = {}
try:
    spec = importlib.util.find_spec(name)
except Exception as e:
    spec = None
    out["error"] = repr(e)
if spec is not None:
    locs = list(spec.submodule_search_locations or [])
    out["dir"] = locs[0] if locs else (os.path.dirname(spec.origin) if spec.origin else None)
try:
    import importlib.metadata as md

    out["version"] = md.version(dist)
except Exception:
    out["version"] = None
print(json.dumps(out))

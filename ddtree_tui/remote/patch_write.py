"""Write patched files on the host with the shared atomic writer, backups first (patches).

stdin: {"backups": [{"to", "text"}], "writes": [{"path", "text"}], "state_path", "state"}; one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

from ddtree_tui.remote.atomicio import write_file

cfg = json.loads(sys.stdin.read())


def put(path: str, text: str, mode: Optional[int] = None) -> None:
    # the shared writer: atomic for regular files, a special file is written as it is, a directory refused
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_file(path, text, mode=mode, tmp_suffix=".ddtree-tmp")


done: List[str] = []
for b in cfg.get("backups", []):
    if not os.path.exists(b["to"]):
        put(b["to"], b["text"])
for w in cfg["writes"]:
    mode = os.stat(w["path"]).st_mode & 0o7777 if os.path.exists(w["path"]) else None
    put(w["path"], w["text"], mode)
    done.append(w["path"])
if cfg.get("state_path"):
    if cfg.get("state") is None:
        try:
            os.unlink(cfg["state_path"])
        except OSError:
            pass
    else:
        put(cfg["state_path"], json.dumps(cfg["state"]))
print(json.dumps({"written": done}))

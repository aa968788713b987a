"""Each load shape headless on the demo, short: levels run, knee found, drift, wall time; a Markdown table.

    python benchmarks/load_shapes.py [--max-new-tokens 128]

Every run is `ddtree-tui --demo --run-bench ...` in a child process (the demo's two simulated services), its
--json read back; the history goes to a temporary file, so .ddtree/ is left alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHAPES: list[tuple[str, list[str]]] = [
    ("sync", ["--load", "sync", "--requests", "8"]),
    # 16 requests a level never keep more than 16 in flight: c=32 runs like c=16, so no knee shows
    ("concurrency", ["--load", "concurrency:1,2,4,8,16,32", "--requests", "16"]),
    ("concurrency", ["--load", "concurrency:1,2,4,8,16,32", "--duration", "3s"]),
    ("sweep", ["--load", "sweep", "--duration", "3s"]),
    ("rate", ["--load", "rate:2,4,8,16", "--requests", "16"]),
    ("poisson", ["--load", "poisson:8,7", "--requests", "16"]),
    ("soak", ["--soak", "--load", "concurrency:2", "--duration", "30s", "--window", "5s"]),
    ("agentic", ["--prompts", "agentic", "--sessions", "4", "--turns", "4"]),
]


def summary(doc: dict[str, Any]) -> tuple[str, str, str]:
    """(levels or windows, knee / drift / cached tokens, notes) of one run's JSON."""
    if doc["kind"] == "load":
        levels = ", ".join(lv["label"] for lv in doc["levels"])
        knee = "; ".join(f"{k.split('/')[-1]}: {v or 'none'}" for k, v in doc["knee"].items())
        return levels, knee, doc.get("stopped") or ""
    if doc["kind"] == "soak":
        n = len({w["index"] for w in doc["windows"]})
        drift = "; ".join(f"{d['service']} {d['kind']} w{d['window']}" for d in doc["drift"]) or "no drift"
        return f"{n} windows × {len(doc['targets'])} services", drift, ""
    turns = doc["turns_results"]
    last = [t.get("cached_tokens") or 0 for t in turns if t["turn"] == doc["turns"]]
    first = [t.get("cached_tokens") or 0 for t in turns if t["turn"] == 1]
    return (
        f"{doc['sessions']} sessions × {doc['turns']} turns",
        f"cached tokens turn 1 → {doc['turns']}: {min(first, default=0)} → {max(last, default=0)}",
        f"{doc['failed']} failed",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ns = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, args in SHAPES:
            out = Path(d) / f"{name}.json"
            argv = ["--demo", "--run-bench", *args, "--max-new-tokens", str(ns.max_new_tokens)]
            t0 = time.monotonic()
            p = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ddtree_tui.cli",
                    *argv,
                    "--json",
                    str(out),
                    "--history",
                    f"{d}/h.jsonl",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            took = time.monotonic() - t0
            if not out.exists():
                rows.append((name, " ".join(argv), f"exit {p.returncode}", p.stderr[-200:], "", took))
                continue
            levels, knee, note = summary(json.loads(out.read_text()))
            rows.append((name, " ".join(argv), levels, knee, note, took))
    print("| shape | command (`ddtree-tui ...`) | levels run | knee / drift / cache | stopped | time (s) |")
    print("|---|---|---|---|---|---|")
    for name, cmd, levels, knee, note, took in rows:
        print(f"| {name} | `{cmd}` | {levels} | {knee} | {note} | {took:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

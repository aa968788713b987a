"""How long the todo store's operations take: a save (temp + fsync + rename + backup), a save that has to
merge an external edit, a reload check with nothing changed (what the fleet does every second), and a
reload that merges. Prints a table; run: python benchmarks/todo_saves.py [--items N] [--rounds N]"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ddtree_tui.todo import TodoStore


def _time(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "todos.json"
        s = TodoStore(p)
        s.load()
        for i in range(a.items):
            s.add(f"item {i}", check="service ct200/dflash ready" if i % 2 else None)
        s.save()
        other = TodoStore(p)
        other.load()
        n = {"i": 0}

        def save() -> None:
            s.set_status(n["i"] % a.items, "in_progress" if n["i"] % 2 else "pending")
            n["i"] += 1
            s.save()

        def external_then_save() -> None:
            doc = json.loads(p.read_text())
            doc["todos"][0]["note"] = n["i"]
            p.write_text(json.dumps(doc))
            save()

        def external_then_reload() -> None:
            doc = json.loads(p.read_text())
            doc["todos"][1]["note"] = n["i"]
            n["i"] += 1
            p.write_text(json.dumps(doc))
            assert s.reload_if_changed()

        rows = [
            ("save (fsync, rename, backup)", _time(save, a.rounds)),
            ("save merging an external edit", _time(external_then_save, a.rounds)),
            ("reload_if_changed, no change", _time(lambda: s.reload_if_changed(), a.rounds * 10)),
            ("external write + reload/merge", _time(external_then_reload, a.rounds)),
        ]
    print(f"todo store, {a.items} items, {a.rounds} rounds (ms)")
    print(f"{'operation':<34} {'median':>8} {'p95':>8} {'max':>8}")
    for name, xs in rows:
        xs.sort()
        p95 = xs[int(len(xs) * 0.95) - 1]
        print(f"{name:<34} {statistics.median(xs):8.3f} {p95:8.3f} {xs[-1]:8.3f}")


if __name__ == "__main__":
    main()

"""The order xdist hands tests out in (issue 24): longest first, from `tests/durations.json` (seconds each
module's tests and each of the slowest tests took in a whole run). A worker that draws a 40-second test last
keeps the run going while the other workers sit idle; started first, it runs beside the many short ones.

An estimate only: a test not listed counts its module's remaining seconds shared among its other tests, a
module not listed counts as short; a stale figure changes the order, never what a test does. A test of an
xdist_group runs on one worker with its group, so the group is ranked by the sum of its tests.

Refresh from a saved whole run: `scripts/test --durations=0 | tee LOG; .venv/bin/python -m tests.durations LOG`.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

FILE = Path(__file__).with_name("durations.json")
SLOWEST = 80  # tests listed by name; the rest only through their module's sum
LINE = re.compile(r"^([\d.]+)s (?:call|setup|teardown)\s+(\S+)")


def load(path: Path = FILE) -> tuple[dict[str, float], dict[str, float]]:
    """(seconds by module path, seconds by test node id); empty when the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return dict(data["modules"]), dict(data["tests"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}, {}


def estimates(nodeids: list[str], path: Path = FILE) -> dict[str, float]:
    """Estimated seconds of each test node id."""
    modules, tests = load(path)
    count: dict[str, int] = defaultdict(int)
    listed: dict[str, float] = defaultdict(float)
    for nid in nodeids:
        mod = nid.split("::", 1)[0]
        if nid in tests:
            listed[mod] += tests[nid]
        else:
            count[mod] += 1
    out: dict[str, float] = {}
    for nid in nodeids:
        mod = nid.split("::", 1)[0]
        if nid in tests:
            out[nid] = tests[nid]
        else:
            out[nid] = max(0.0, modules.get(mod, 0.0) - listed[mod]) / max(1, count[mod])
    return out


def refresh(log: Path, path: Path = FILE) -> None:
    """durations.json from a `--durations=0` log: each module's sum and the SLOWEST longest tests."""
    per_test: dict[str, float] = defaultdict(float)
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = LINE.match(line.strip())
        if m:
            per_test[m.group(2)] += float(m.group(1))
    per_module: dict[str, float] = defaultdict(float)
    for nid, s in per_test.items():
        per_module[nid.split("::", 1)[0]] += s
    about = json.loads(path.read_text(encoding="utf-8")).get("_about", "") if path.exists() else ""
    slowest = sorted(per_test.items(), key=lambda kv: -kv[1])[:SLOWEST]
    data = {
        "_about": about,
        "modules": {k: round(v, 1) for k, v in sorted(per_module.items(), key=lambda kv: -kv[1]) if v >= 0.5},
        "tests": {k: round(v, 1) for k, v in slowest},
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    refresh(Path(sys.argv[1]))

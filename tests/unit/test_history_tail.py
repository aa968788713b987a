"""The bench history as a live view reads it: the last runs only, and only the bytes appended since."""

from __future__ import annotations

from pathlib import Path

from ddtree_tui.bench import history
from ddtree_tui.bench.models import BenchRun
from tests.bench_runs import plain_run


def _run(i: int) -> BenchRun:
    return plain_run(f"r{i}")


def test_tail_keeps_the_last_runs_however_long_the_history(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    tail = history.HistoryTail(h, keep=5)
    assert tail.runs() == []
    for i in range(40):
        history.append(_run(i), h)
        runs = tail.runs()
        assert len(runs) <= 5
        assert runs[-1].id == f"r{i}"
    assert [r.id for r in tail.runs()] == [f"r{i}" for i in range(35, 40)]
    assert len(tail._runs) == 5
    assert tail.offset == h.stat().st_size


def test_tail_reads_only_appended_bytes(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    history.append(_run(0), h)
    history.append(_run(1), h)
    tail = history.HistoryTail(h, keep=10)
    assert [r.id for r in tail.runs()] == ["r0", "r1"]
    # overwrite what was already read, in place (same inode, same size): a full re-read would lose r0 and r1
    size = h.stat().st_size
    with open(h, "r+b") as f:
        f.write(b"x" * (size - 1))
    history.append(_run(2), h)
    assert [r.id for r in tail.runs()] == ["r0", "r1", "r2"]
    assert history.load(h)[-1].id == "r2" and len(history.load(h)) == 1  # the full reader sees the damage


def test_tail_skips_torn_lines_and_follows_replacement(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    history.append(_run(0), h)
    with open(h, "a") as f:
        f.write('{"schema": 1, "id": "torn')  # a crash mid-line: not read until a newline ends it
    tail = history.HistoryTail(h, keep=10)
    assert [r.id for r in tail.runs()] == ["r0"]
    history.append(_run(1), h)
    assert [r.id for r in tail.runs()] == ["r0", "r1"]
    new = tmp_path / "new.jsonl"
    history.append(_run(7), new)
    new.replace(h)  # another file under the same name: read from scratch
    assert [r.id for r in tail.runs()] == ["r7"]
    h.unlink()
    assert tail.runs() == []


def test_load_tail_is_cached_per_path(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    for i in range(30):
        history.append(_run(i), h)
    assert [r.id for r in history.load_tail(h)] == [f"r{i}" for i in range(10, 30)]
    history.append(_run(30), h)
    assert history.load_tail(h)[-1].id == "r30" and len(history.load_tail(h)) == history.RECENT_RUNS
    for i in range(history._TAILS_KEPT + 3):
        history.load_tail(tmp_path / f"other{i}.jsonl")
    assert len(history._TAILS) <= history._TAILS_KEPT

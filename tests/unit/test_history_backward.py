"""The bench history read from its end (issue 26): a run's start (the identities it compares with), the live
view's first look, the load/soak/agentic list and the todo list's bench checks read the runs they need, not
the whole file that every run makes longer, and answer what a whole-file read answers."""

from __future__ import annotations

import builtins
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ddtree_tui.bench import history
from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.models import RequestResult, TargetInfo
from ddtree_tui.bench.results import LoadRun
from ddtree_tui.model.identity import TargetIdentity
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.todo import evidence
from tests.bench_runs import plain_run

REF = "h/a"


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 16])
def test_lines_backward_are_the_lines_newest_first_at_any_block_size(tmp_path: Path, block: int) -> None:
    rnd = random.Random(block)
    cases = [b"", b"\n", b"\n\n", b"a", b"a\n", b"ab\ncd", b"ab\ncd\n", b"\nx\n\ny"]
    for _ in range(30):  # lines from empty to a few blocks long, with and without a final line break
        lines = [bytes(rnd.choice(b"xyz{}") for _ in range(rnd.choice([0, 1, 5, 200]))) for _ in range(9)]
        cases.append(b"\n".join(lines) + rnd.choice([b"", b"\n"]))
    p = tmp_path / "f"
    for data in cases:
        p.write_bytes(data)
        assert list(history.lines_backward(p, block)) == data.split(b"\n")[::-1], data


def _load_run(i: int, at: datetime) -> LoadRun:
    return LoadRun(
        id=f"L{i}",
        started_at=at,
        load=parse_load("concurrency:1"),
        load_text="concurrency:1",
        prompt_set="seed3",
    )


def _ident(i: int) -> TargetIdentity:
    return TargetIdentity(ref=REF, kind="launched", verdict="ours", verified=True, port=8000 + i)


def _long_history(path: Path, n: int = 120) -> None:
    """Plain runs (every third one failed), load runs, a finished soak and one that never finished (its
    start line and windows only), a torn line, and a line being appended at the end."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out: list[str] = []
    for i in range(n):
        at = t0 + timedelta(minutes=i)
        if i % 4 == 3:
            out.append(_load_run(i, at).model_dump_json(by_alias=True))
            continue
        ok = i % 3 != 0
        target = TargetInfo(
            ref=REF, base_url="http://127.0.0.1:1", algorithm="dflash", mode=None, identity=_ident(i)
        )
        res = RequestResult(
            service=REF, algorithm="dflash", mode=None, prompt_id="p1", repeat=0, seq=0, ok=ok,
            error=None if ok else "boom", started_at=at.timestamp(),
        )  # fmt: skip
        run = plain_run(f"r{i}", started_at=at, targets=[target], results=[res])
        out.append(run.model_dump_json(by_alias=True))
        if i == 50:
            out.append('{"schema": 1, "id": "torn')  # a crash mid-line, the next run appended after it
    out.append(json.dumps({"kind": "soak_started", "run_id": "S1", "started_at": t0.isoformat(),
                           "load_text": "sync", "concurrency": 1, "duration_s": 1.0, "window_s": 1.0}))  # fmt: skip
    path.write_text("\n".join(out) + "\n" + '{"schema": 1, "id": "half')


def _whole_shapes(path: Path, keep: int) -> list[Any]:
    """load_shapes as it read before: every line of the whole file."""
    objs = []
    for line in path.read_bytes().splitlines():
        if b'"kind"' in line:
            try:
                objs.append(json.loads(line))
            except ValueError:
                continue
    return history.load_shapes_from(objs, keep)


def _whole_identities(path: Path, keep: int) -> list[TargetIdentity]:
    out: list[list[TargetIdentity]] = []
    history._identities_of(iter(reversed(path.read_bytes().splitlines())), out, keep)
    return [i for run in reversed(out) for i in run]


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes the history module reads from files from now on, in [0]."""
    read = [0]
    real_open = builtins.open

    def counting_open(*a: Any, **k: Any) -> Any:
        f = real_open(*a, **k)
        real_read = f.read

        def read_(n: int = -1) -> Any:
            data = real_read(n)
            read[0] += len(data)
            return data

        f.read = read_
        return f

    monkeypatch.setattr(history, "open", counting_open, raising=False)
    return read


def test_readers_from_the_end_answer_what_the_whole_file_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = tmp_path / "h.jsonl"
    _long_history(h)
    monkeypatch.setattr(history, "BLOCK", 512)  # many blocks, lines across their edges
    for keep in (1, 3, 20, 500):
        assert history.load_shapes(h, keep) == _whole_shapes(h, keep), keep
        assert history.recent_identities(h, keep) == _whole_identities(h, keep), keep
    shapes = history.load_shapes(h, 3)
    assert [r.id for r in shapes] == ["L115", "L119", "S1"] and shapes[-1].status == "interrupted"
    whole = [r for r in history.load(h)]
    tail = history.HistoryTail(h, keep=7)
    assert tail.runs() == whole[-7:]  # the first look, from the end
    assert tail.offset == h.stat().st_size - len(b'{"schema": 1, "id": "half')  # the torn end: next time
    with open(h, "a") as f:  # the line being appended is finished, and one more run comes
        f.write('"}\n' + plain_run("r999").model_dump_json(by_alias=True) + "\n")
    assert [r.id for r in tail.runs()][-1] == "r999" and len(tail.runs()) == 7
    # and each reads only the end of the file for the last run
    read = _count_reads(monkeypatch)
    for look in (
        lambda: history.load_shapes(h, 1),
        lambda: history.recent_identities(h, 5),  # back to r118, the latest with an identity
        lambda: history.HistoryTail(h, keep=1).runs(),
    ):
        read[0] = 0
        assert look()
        assert 0 < read[0] < h.stat().st_size // 20


def test_a_bench_check_reads_back_to_its_deciding_run_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = tmp_path / "h.jsonl"
    _long_history(h)
    whole = history.load(h)
    for ref, ps in ((REF, "seed3"), (REF, "other"), ("h/b", "seed3")):
        assert evidence.history_bench_ok(h, ref, ps) == evidence.bench_ok(whole, ref, ps), (ref, ps)
    # the latest plain run (r118, ok) decides: only the blocks back to it are read
    read = _count_reads(monkeypatch)
    monkeypatch.setattr(history, "BLOCK", 512)
    evidence._VERDICTS.clear()
    assert evidence.history_bench_ok(h, REF, "seed3") is True
    assert 0 < read[0] < h.stat().st_size // 20  # the last few lines' blocks
    read[0] = 0
    assert evidence.history_bench_ok(h, REF, "seed3") is True  # the file did not change: no read at all
    assert read[0] == 0
    ctx = evidence.HistoryBenchContext(FleetSnapshot(), h)
    assert ctx.bench_ok("h/b", "seed3") is None  # no such run: the whole file, once
    assert read[0] >= h.stat().st_size - 64


def test_a_todo_list_without_bench_checks_reads_no_history(tmp_path: Path) -> None:
    from ddtree_tui.model.todo import TodoItem

    items = [TodoItem(content="up", check="service h/a ready"), TodoItem(content="no check")]
    assert evidence.bench_keys(items) == set()
    items.append(TodoItem(content="measured", check="bench h/a seed3 ok"))
    assert evidence.bench_keys(items) == {("h/a", "seed3")}

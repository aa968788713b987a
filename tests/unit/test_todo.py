"""The todo store: round trip, merge, corrupt files, and evidence judged against hand-built snapshots."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddtree_tui.bench.models import BenchRun
from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample, HostView, ServiceStatus
from ddtree_tui.todo import TodoError, TodoItem, TodoStore, parse_check
from ddtree_tui.todo import store as todo_mod
from ddtree_tui.todo.evidence import HistoryBenchContext, apply_auto_complete, evaluate
from tests.bench_runs import bench_run, write_history


def _write(p: Path, doc: object) -> None:
    p.write_text(json.dumps(doc, indent=2))


def _store(p: Path) -> TodoStore:
    s = TodoStore(p)
    s.load()
    assert s.error is None, s.error
    return s


# --- round trip ------------------------------------------------------------------------------------------


def test_round_trip_keeps_unknown_fields(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    doc = {
        "todos": [
            {"content": "a", "status": "in_progress", "priority": "high", "id": "x1", "tags": ["gpu"]},
            {"content": "b", "status": "pending", "priority": "low", "nested": {"k": [1, 2]}, "n": 3.5},
        ],
        "version": 7,
        "owner": {"tool": "todowrite"},
    }
    _write(p, doc)
    s = _store(p)
    assert s.items[0].tags == ["gpu"]  # type: ignore[attr-defined]
    s.set_status(1, "completed")
    s.save()
    out = json.loads(p.read_text())
    assert out["version"] == 7 and out["owner"] == {"tool": "todowrite"}
    assert out["todos"][0] == doc["todos"][0]
    want_b = {**doc["todos"][1], "status": "completed"}  # type: ignore[dict-item]
    assert out["todos"][1] == want_b
    assert "id" not in out["todos"][1] and "check" not in out["todos"][1]
    # the backup is the previous version
    assert json.loads((tmp_path / "todos.json.bak").read_text()) == doc


def test_bare_list_stays_a_list(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    _write(p, [{"content": "only", "status": "pending", "priority": "medium", "x": 1}])
    s = _store(p)
    s.add("two")
    s.save()
    out = json.loads(p.read_text())
    assert isinstance(out, list) and out[0]["x"] == 1 and out[1]["content"] == "two"


def test_missing_file_is_empty_and_created_on_save(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "todos.json"
    s = _store(p)
    assert s.items == []
    it = s.add("first", priority="high", check="host ct200 connected")
    assert it.id and it.status == "pending"
    s.save()
    out = json.loads(p.read_text())
    assert out["todos"][0]["check"] == "host ct200 connected"


def test_edit_move_delete(tmp_path: Path) -> None:
    s = _store(tmp_path / "t.json")
    for t in ("a", "b", "c"):
        s.add(t)
    s.move(0, 2)
    assert [i.content for i in s.items] == ["b", "c", "a"]
    s.move(2, -5)
    assert [i.content for i in s.items] == ["a", "b", "c"]
    s.edit(1, content="B", priority="high", check="gpu h:0 memory < 10")
    s.edit(1, check="")
    assert s.items[1].content == "B" and s.items[1].priority == "high" and s.items[1].check is None
    s.delete(0)
    s.save()
    assert [i["content"] for i in json.loads((tmp_path / "t.json").read_text())["todos"]] == ["B", "c"]
    with pytest.raises(TodoError, match="no item 5"):
        s.set_status(4, "completed")
    with pytest.raises(TodoError, match="status must be"):
        s.set_status(0, "done")
    with pytest.raises(ValueError, match="bad check"):
        s.add("x", check="service nonsense")


# --- corrupt file ---------------------------------------------------------------------------------------


def test_corrupt_json_is_read_only_with_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    bad = '{\n  "todos": [\n    {"content": "a", "status": "pending",}\n  ]\n}\n'
    p.write_text(bad)
    before = os.stat(p)
    s = TodoStore(p)
    s.load()
    assert s.read_only
    assert s.error is not None and s.error.startswith(f"{p}:3:")
    col = int(s.error.split(":")[2])
    assert col == bad.splitlines()[2].index("}") + 1
    with pytest.raises(TodoError, match="read-only"):
        s.add("x")
    with pytest.raises(TodoError, match="read-only"):
        s.save()
    assert p.read_text() == bad and os.stat(p).st_mtime_ns == before.st_mtime_ns
    assert not (tmp_path / "todos.json.bak").exists()


def test_invalid_item_points_at_its_line(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    text = '{"todos": [\n  {"content": "ok"},\n  {"content": "bad", "status": "done"}\n]}\n'
    p.write_text(text)
    s = TodoStore(p)
    s.load()
    assert s.read_only and s.error is not None
    assert s.error.startswith(f"{p}:3:3: todos[1].status")


def test_file_turns_corrupt_on_disk_then_is_repaired(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    s = _store(p)
    s.add("a")
    s.save()
    good = p.read_text()
    p.write_text("{ nope")
    assert s.reload_if_changed() is True
    assert s.read_only and s.error and ":1:3:" in s.error
    with pytest.raises(TodoError):
        s.save()
    assert p.read_text() == "{ nope"
    p.write_text(good)
    assert s.reload_if_changed() is True
    assert not s.read_only and s.error is None and s.items[0].content == "a"


def test_save_refuses_when_disk_became_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    s = _store(p)
    s.add("a")
    s.save()
    s.add("b")
    p.write_text('{"todos": [')
    with pytest.raises(TodoError, match="corrupt"):
        s.save()
    assert p.read_text() == '{"todos": [' and s.read_only


# --- concurrent edits -----------------------------------------------------------------------------------


def test_external_edit_is_merged_not_overwritten(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    _write(p, {"todos": [{"content": "one"}, {"content": "two"}, {"content": "three"}], "meta": 1})
    ours = _store(p)
    ours.set_status(1, "in_progress")
    ours.add("ours-new")
    # another tool (no lock, plain write) edits item one, deletes three, adds an item, changes meta
    _write(
        p,
        {
            "todos": [
                {"content": "one", "status": "completed", "note": "theirs"},
                {"content": "two"},
                {"content": "theirs-new", "priority": "high"},
            ],
            "meta": 2,
        },
    )
    ours.save()
    out = json.loads(p.read_text())
    by = {t["content"]: t for t in out["todos"]}
    assert by["one"]["status"] == "completed" and by["one"]["note"] == "theirs"
    assert by["two"]["status"] == "in_progress"
    assert "three" not in by
    assert by["theirs-new"]["priority"] == "high"
    assert "ours-new" in by
    assert out["meta"] == 2
    assert [t["content"] for t in out["todos"]][:2] == ["one", "two"] and len(out["todos"]) == 4


def test_edit_landing_during_our_save_is_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor writes between our merge and our rename: the save notices and merges again."""
    p = tmp_path / "todos.json"
    _write(p, {"todos": [{"content": "a", "id": "1"}, {"content": "b", "id": "2"}]})
    s = _store(p)
    s.set_status(0, "completed")
    real = todo_mod._make_backup
    calls = {"n": 0}

    def sneaky(path: Path, backup: Path) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            _write(p, {"todos": [{"content": "a", "id": "1"}, {"content": "b2", "id": "2", "extra": True}]})
        real(path, backup)

    monkeypatch.setattr(todo_mod, "_make_backup", sneaky)
    s.save()
    assert calls["n"] == 2
    out = json.loads(p.read_text())["todos"]
    assert out == [
        {"content": "a", "priority": "medium", "status": "completed", "id": "1"},
        {"content": "b2", "priority": "medium", "status": "pending", "id": "2", "extra": True},
    ]


def test_two_stores_interleaved_lose_nothing(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    a, b = _store(p), _store(p)
    for i in range(10):
        a.add(f"a{i}")
        a.save()
        b.add(f"b{i}")
        b.save()
    final = _store(p)
    assert sorted(i.content for i in final.items) == sorted(
        [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
    )


def test_reload_if_changed_is_cheap_and_merges_unsaved(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    s = _store(p)
    s.add("a")
    s.save()
    assert s.reload_if_changed() is False
    s.add("unsaved")
    other = _store(p)
    other.set_status(0, "completed")
    other.add("other")
    other.save()
    assert s.reload_if_changed() is True
    assert [(i.content, i.status) for i in s.items] == [
        ("a", "completed"),
        ("unsaved", "pending"),
        ("other", "pending"),
    ] or [(i.content, i.status) for i in s.items] == [
        ("a", "completed"),
        ("other", "pending"),
        ("unsaved", "pending"),
    ]
    s.save()
    assert {i.content for i in _store(p).items} == {"a", "unsaved", "other"}


def test_delete_vs_edit_keeps_the_edit(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    _write(p, {"todos": [{"content": "x", "id": "1"}]})
    s = _store(p)
    s.delete(0)
    _write(p, {"todos": [{"content": "x", "id": "1", "status": "in_progress"}]})
    s.save()
    assert json.loads(p.read_text())["todos"][0]["status"] == "in_progress"


# --- checks and evidence --------------------------------------------------------------------------------


def test_parse_check_kinds() -> None:
    c = parse_check("service ct200/dflash ready")
    assert (c.kind, c.host, c.service, c.state) == ("service", "ct200", "dflash", "ready")
    c = parse_check("bench ct200/ddtree-shadow seed3 ok")
    assert (c.kind, c.service_ref, c.prompt_set) == ("bench", "ct200/ddtree-shadow", "seed3")
    c = parse_check("host ct129 connected")
    assert (c.kind, c.host, c.state) == ("host", "ct129", "connected")
    c = parse_check("gpu ct200:1 memory < 1000")
    assert (c.kind, c.host, c.gpu_index, c.metric, c.op, c.value) == ("gpu", "ct200", 1, "memory", "<", 1000)
    c = parse_check("gpu ct200:0 util>=90")
    assert (c.metric, c.op, c.value) == ("util", ">=", 90)
    assert parse_check("gpu h:3 temp <= 80.5").value == 80.5
    assert parse_check("gpu h:3 mem > 5").metric == "memory"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty check"),
        ("service ct200 ready", "is not HOST/SVC"),
        ("service ct200/x happy", "unknown service state"),
        ("bench ct200/x seed3 good", "ends with 'ok'"),
        ("host ct200 up", "unknown host state"),
        ("gpu ct200 memory < 5", "is not HOST:INDEX"),
        ("gpu ct200:1 power < 5", "unknown GPU metric"),
        ("gpu ct200:1 memory ~ 5", "bad check"),
        ("gpu ct200:1 memory < lots", "is not a number"),
        ("launch the thing", "expected one of"),
    ],
)
def test_parse_check_errors(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_check(text)


class Ctx:
    def __init__(self, snapshot: FleetSnapshot, bench: dict[tuple[str, str], bool] | None = None) -> None:
        self.snapshot = snapshot
        self.bench = bench or {}

    def bench_ok(self, service_ref: str, prompt_set: str) -> bool | None:
        return self.bench.get((service_ref, prompt_set))


def _snap() -> FleetSnapshot:
    return FleetSnapshot(
        hosts=[
            HostView(
                name="ct200",
                address="ct200",
                state="connected",
                gpus=[
                    GpuSample(index=0, mem_used_mb=21491, util_gpu=100, temp_c=57),
                    GpuSample(index=1, mem_used_mb=4, util_gpu=0, temp_c=None),
                ],
                services=[
                    ServiceStatus(name="dflash", host="ct200", algorithm="dflash", port=30010, state="ready"),
                    ServiceStatus(
                        name="ddtree", host="ct200", algorithm="ddtree", port=30011, state="starting"
                    ),
                ],
            ),
            HostView(name="ct129", address="ct129", state="disconnected", error="Connection refused"),
        ]
    )


@pytest.mark.parametrize(
    ("check", "state", "detail"),
    [
        ("service ct200/dflash ready", "verified", "is ready"),
        ("service ct200/ddtree ready", "failing", "is starting"),
        ("service ct200/nope ready", "unknown", "no service"),
        ("service ct129/dflash ready", "unknown", "disconnected"),
        ("service zz/dflash ready", "unknown", "no host"),
        ("host ct200 connected", "verified", "connected"),
        ("host ct129 connected", "failing", "Connection refused"),
        ("host ct129 disconnected", "verified", "disconnected"),
        ("gpu ct200:1 memory < 1000", "verified", "4 MiB"),
        ("gpu ct200:0 memory < 1000", "failing", "21491 MiB (not < 1000)"),
        ("gpu ct200:0 util >= 90", "verified", "100 %"),
        ("gpu ct200:0 temp > 60", "failing", "57 C"),
        ("gpu ct200:1 temp < 60", "unknown", "not reported"),
        ("gpu ct200:7 memory < 1", "unknown", "no GPU 7"),
        ("gpu ct129:0 memory < 1", "unknown", "disconnected"),
        ("bench ct200/dflash seed3 ok", "verified", "no failed prompt"),
        ("bench ct200/ddtree seed3 ok", "failing", "had failed prompts"),
        ("bench ct200/dflash agentic ok", "unknown", "no finished"),
        ("host what is this", "unknown", "bad check"),
    ],
)
def test_evaluate_each_kind(check: str, state: str, detail: str) -> None:
    ctx = Ctx(_snap(), {("ct200/dflash", "seed3"): True, ("ct200/ddtree", "seed3"): False})
    [ev] = evaluate([TodoItem(content="x", check=check)], ctx)
    assert ev.state == state
    assert detail in ev.detail


def test_mismatch_flags() -> None:
    items = [
        TodoItem(content="a", status="completed", check="service ct200/ddtree ready"),  # fails
        TodoItem(content="b", status="in_progress", check="service ct200/dflash ready"),  # holds
        TodoItem(content="c", status="pending", check="host ct200 connected"),  # holds
        TodoItem(content="d", status="completed", check="service ct200/dflash ready"),  # fine
        TodoItem(content="e", status="in_progress", check="service ct200/ddtree ready"),  # fine
        TodoItem(content="f", status="completed", check="service ct129/x ready"),  # unknown: no flag
        TodoItem(content="g", status="cancelled", check="host ct200 connected"),  # cancelled: no flag
        TodoItem(content="h", status="completed"),
    ]
    evs = evaluate(items, Ctx(_snap()))
    assert [e.index for e in evs] == list(range(8))
    assert [e.mismatch for e in evs] == [
        "completed but evidence fails",
        "evidence holds but still in_progress",
        "evidence holds but still pending",
        None,
        None,
        None,
        None,
        None,
    ]
    assert evs[7].state == "none"


def test_auto_complete(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    s = _store(p)
    s.add("ready", check="service ct200/dflash ready")
    s.add("not ready", check="service ct200/ddtree ready")
    s.add("no check")
    ev = evaluate(s.items, Ctx(_snap()))
    assert apply_auto_complete(s, ev) == []  # not allowed by default
    assert s.items[0].status == "pending"
    s.items[0].auto_complete = True  # type: ignore[attr-defined]  # an item can opt in on its own
    assert apply_auto_complete(s, ev) == [0]
    s.items[0].status = "in_progress"
    s.auto_complete = True
    assert apply_auto_complete(s, evaluate(s.items, Ctx(_snap()))) == [0]
    saved = json.loads(p.read_text())["todos"]
    assert [t["status"] for t in saved] == ["completed", "pending", "pending"]


def test_history_bench_context(tmp_path: Path) -> None:
    # the history holds typed BenchRun lines (bench/history.py); the assertions are the ones the old
    # loose-dict reader had
    h = tmp_path / "bench-history.jsonl"
    lines: list[BenchRun | str] = [
        bench_run("seed3", [("ct200/a", None), ("ct200/b", "HTTP 500"), ("ct200/b", None)]),
        "not json at all",
        bench_run("seed3", [("ct200/a", "boom")]),
        bench_run("agentic", [("ct200/a", None)]),
        bench_run("seed3", [("ct200/b", None)], status="interrupted"),
        bench_run("longctx", [("ct200/a", "timeout")]),
    ]
    write_history(h, lines)
    ctx = HistoryBenchContext(FleetSnapshot(), h)
    assert ctx.bench_ok("ct200/a", "seed3") is False  # the latest seed3 run of a had an error
    assert ctx.bench_ok("ct200/b", "seed3") is False  # the running run is ignored
    assert ctx.bench_ok("ct200/a", "agentic") is True
    assert ctx.bench_ok("ct200/a", "longctx") is False
    assert ctx.bench_ok("ct200/c", "seed3") is None
    assert (
        HistoryBenchContext(FleetSnapshot(), tmp_path / "missing.jsonl").bench_ok("ct200/a", "seed3") is None
    )


def test_backup_when_file_and_backup_are_one_inode_leaves_no_temp(tmp_path: Path) -> None:
    """A writer killed between making the backup and its rename leaves todos.json and .bak as one inode."""
    from ddtree_tui.todo import TodoStore

    p = tmp_path / "todos.json"
    s = TodoStore(p)
    s.load()
    s.add("one")
    s.save()
    bak = p.with_name(p.name + ".bak")
    bak.unlink(missing_ok=True)
    os.link(p, bak)  # what the killed writer left
    s2 = TodoStore(p)
    s2.load()
    s2.add("two")
    s2.save()
    assert list(tmp_path.glob(".todos.json*.tmp")) == []
    again = TodoStore(p)
    again.load()
    assert [i.content for i in again.items] == ["one", "two"]
    assert "one" in bak.read_text() and "two" not in bak.read_text()


def test_interrupted_bench_run_is_not_evidence(tmp_path: Path) -> None:
    """Issue 19: an interrupted seed3 run (2 of 3 prompts never ran) is not `no failed prompt`."""
    h = tmp_path / "bench-history.jsonl"
    run = bench_run("seed3", [("local/dflash", None)], status="interrupted")
    write_history(h, [run])
    assert HistoryBenchContext(FleetSnapshot(), h).bench_ok("local/dflash", "seed3") is None
    done = run.model_copy(update={"status": "complete"})
    write_history(h, [done, run])
    assert (
        HistoryBenchContext(FleetSnapshot(), h).bench_ok("local/dflash", "seed3") is True
    )  # the complete one

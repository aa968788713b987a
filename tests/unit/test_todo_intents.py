"""Todo edits as intents: TodoStore.apply (table-driven), bench evidence over typed runs, and Fleet.todo_apply
as the file's one writer (refusals, a failed save that changes nothing, concurrent merges that lose nothing)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ddtree_tui.bench.models import BenchRun, ServiceSummary
from ddtree_tui.collector.attach import FollowerFleet
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.intents import Todo
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.todo import TodoEdit, TodoError, TodoStore, TodoView
from ddtree_tui.todo.evidence import bench_ok
from ddtree_tui.ui.backend import StaticFleet, StaticTodo
from tests.bench_runs import bench_run


def _store(tmp_path: Path, *contents: str) -> TodoStore:
    s = TodoStore(tmp_path / "todos.json")
    s.load()
    for c in contents:
        s.add(c)
    return s


@pytest.mark.parametrize(
    ("edit", "want", "index"),
    [
        (
            TodoEdit(action="add", content="d", priority="high"),
            ["a:pending", "b:pending", "c:pending", "d:pending"],
            3,
        ),
        (TodoEdit(action="start", index=1), ["a:pending", "b:in_progress", "c:pending"], 1),
        (TodoEdit(action="complete", index=2), ["a:pending", "b:pending", "c:completed"], 2),
        (TodoEdit(action="cancel", index=0), ["a:cancelled", "b:pending", "c:pending"], 0),
        (TodoEdit(action="toggle", index=0), ["a:completed", "b:pending", "c:pending"], 0),
        (TodoEdit(action="delete", index=1), ["a:pending", "c:pending"], 0),
        (TodoEdit(action="up", index=2), ["a:pending", "c:pending", "b:pending"], 1),
        (TodoEdit(action="down", index=0), ["b:pending", "a:pending", "c:pending"], 1),
        (TodoEdit(action="down", index=2), ["a:pending", "b:pending", "c:pending"], 2),
        (TodoEdit(action="edit", index=1, content="B"), ["a:pending", "B:pending", "c:pending"], 1),
    ],
)
def test_apply_each_action(tmp_path: Path, edit: TodoEdit, want: list[str], index: int) -> None:
    s = _store(tmp_path, "a", "b", "c")
    res = s.apply(edit)
    assert res.ok and res.index == index
    assert [f"{it.content}:{it.status}" for it in s.items] == want


def test_toggle_twice_and_edit_fields(tmp_path: Path) -> None:
    s = _store(tmp_path, "a")
    s.apply(TodoEdit(action="toggle", index=0))
    s.apply(TodoEdit(action="toggle", index=0))
    assert s.items[0].status == "pending"
    s.apply(TodoEdit(action="edit", index=0, priority="low", check="host ct200 connected"))
    assert (s.items[0].content, s.items[0].priority, s.items[0].check) == ("a", "low", "host ct200 connected")
    s.apply(TodoEdit(action="edit", index=0, check=""))  # "" removes the evidence link
    assert s.items[0].check is None


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (TodoEdit(action="add"), "needs its text"),
        (TodoEdit(action="add", content="   "), "needs some text"),
        (TodoEdit(action="add", content="x", check="service nope"), "bad check"),
        (TodoEdit(action="start"), "needs an item number"),
        (TodoEdit(action="delete", index=5), "no item 6"),
        (TodoEdit(action="edit", index=0, content=" "), "needs some text"),
    ],
)
def test_apply_refuses_bad_edits(tmp_path: Path, edit: TodoEdit, needle: str) -> None:
    s = _store(tmp_path, "a")
    with pytest.raises((TodoError, ValueError), match=needle):
        s.apply(edit)
    assert [it.content for it in s.items] == ["a"]


@pytest.mark.parametrize(
    ("runs", "want"),
    [
        ([], None),
        ([bench_run("seed3", [("h/a", None)])], True),
        ([bench_run("seed3", [("h/a", "boom")])], False),
        (
            [bench_run("seed3", [("h/a", None)]), bench_run("seed3", [("h/a", "x")], status="interrupted")],
            True,
        ),
        ([bench_run("seed3", [("h/a", "x")]), bench_run("seed3", [("h/b", None)])], False),  # latest with h/a
        ([bench_run("agentic", [("h/a", None)])], None),
        (
            [
                bench_run("seed3", []).model_copy(
                    update={
                        "summary": [ServiceSummary(service="h/a", algorithm="d", mode=None, failed=1)],
                        "targets": bench_run("seed3", [("h/a", None)]).targets,  # it measured h/a, verified
                    }
                )
            ],
            False,
        ),
    ],
)
def test_bench_ok_over_typed_runs(runs: list[BenchRun], want: bool | None) -> None:
    assert bench_ok(runs, "h/a", "seed3") is want


def test_a_run_without_a_verified_identity_is_not_evidence() -> None:
    """Issue 29: a run that measured a foreign listener under h/a's name (forced, or recorded before target
    identity existed) says nothing about h/a; the older verified run still does."""
    good = bench_run("seed3", [("h/a", None)])
    foreign = bench_run("seed3", [("h/a", "boom")])
    ident = foreign.targets[0].identity
    assert ident is not None
    forced = ident.model_copy(update={"verdict": "foreign", "verified": False, "forced": True})
    foreign.targets[0] = foreign.targets[0].model_copy(update={"identity": forced})
    assert bench_ok([good, foreign], "h/a", "seed3") is True
    assert bench_ok([foreign], "h/a", "seed3") is None
    legacy = good.model_copy(update={"targets": []})
    assert bench_ok([legacy], "h/a", "seed3") is None


def test_warmup_failures_are_not_evidence() -> None:
    run = bench_run("seed3", [("h/a", "cold"), ("h/a", None)])
    run.results[0].warmup = True
    assert bench_ok([run], "h/a", "seed3") is True


def test_snapshot_json_round_trip_keeps_todo_fields() -> None:
    view = TodoView.model_validate({"items": [{"content": "a", "tags": ["x"]}], "path": "t.json"})
    snap = FleetSnapshot(todos=view)
    back = FleetSnapshot.model_validate(json.loads(json.dumps(snap.to_json_dict())))
    assert back.todos.items[0].content == "a" and back.todos.items[0].model_extra == {"tags": ["x"]}
    dumped = snap.model_dump(mode="json")
    assert dumped["todos"]["items"] == [
        {"content": "a", "priority": "medium", "status": "pending", "id": None, "check": None, "tags": ["x"]}
    ]


async def test_fleet_todo_apply_saves_and_publishes(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    fleet = Fleet([], todos_path=p, history_path=tmp_path / "h.jsonl", telemetry=False)
    q = fleet.subscribe()
    res = await fleet.todo_apply(TodoEdit(action="add", content="one", check="host ct200 connected"))
    assert res.ok and res.index == 0
    assert [t["content"] for t in json.loads(p.read_text())["todos"]] == ["one"]
    assert [it.content for it in fleet.snapshot().todos.items] == ["one"]
    assert fleet.snapshot().todos.evidence[0].state == "unknown"  # no host ct200 in this fleet
    kinds = []
    while not q.empty():
        kinds.append(q.get_nowait().kind)
    assert "todo" in kinds
    bad = await fleet.todo_apply(TodoEdit(action="delete", index=4))
    assert not bad.ok and bad.invalid and "no item 5" in bad.message


async def test_fleet_refuses_a_read_only_file_and_a_failed_save_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "todos.json"
    p.write_text("{not json")
    fleet = Fleet([], todos_path=p, history_path=tmp_path / "h.jsonl", telemetry=False)
    res = await fleet.todo_apply(TodoEdit(action="add", content="x"))
    assert not res.ok and not res.invalid and "read-only" in res.message
    assert p.read_text() == "{not json"
    assert fleet.snapshot().todos.read_only and "invalid JSON" in (fleet.snapshot().todos.error or "")

    p.write_text(json.dumps({"todos": [{"content": "a"}]}))
    await fleet.refresh_todos()  # the repaired file is taken as it is
    assert [it.content for it in fleet.snapshot().todos.items] == ["a"]

    def fail() -> None:
        raise TodoError("not saved: cannot write (the file on disk is unchanged)")

    monkeypatch.setattr(fleet.todos, "save", fail)
    res = await fleet.todo_apply(TodoEdit(action="delete", index=0))
    assert not res.ok and "not saved" in res.message
    assert [it.content for it in fleet.todos.items] == ["a"]  # the change was put back
    assert [it.content for it in fleet.snapshot().todos.items] == ["a"]


async def test_concurrent_intents_and_auto_complete_merges_lose_nothing(tmp_path: Path) -> None:
    p, hist = tmp_path / "todos.json", tmp_path / "h.jsonl"
    fleet = Fleet([], todos_path=p, history_path=hist, telemetry=False, auto_complete_todos=True)
    await fleet.todo_apply(TodoEdit(action="add", content="bench", check="bench h/a seed3 ok"))
    hist.write_text(bench_run("seed3", [("h/a", None)]).model_dump_json(by_alias=True) + "\n")
    adds = [
        asyncio.create_task(fleet.todo_apply(TodoEdit(action="add", content=f"item {n}"))) for n in range(20)
    ]
    refreshes = [asyncio.create_task(fleet.refresh_todos()) for _ in range(5)]
    await asyncio.gather(*adds, *refreshes)  # interleaved: each waits its turn for the fleet's lock
    assert all(t.result().ok for t in adds)
    disk = json.loads(p.read_text())["todos"]
    assert sorted(t["content"] for t in disk) == sorted(["bench", *(f"item {n}" for n in range(20))])
    assert disk[0]["status"] == "completed"  # the fleet's auto-complete is in the file too


async def test_frozen_and_follower_fleets_refuse_todo_edits() -> None:
    frozen = StaticFleet(FleetSnapshot(), todos=[StaticTodo(content="a", status="completed")])
    assert [it.status for it in frozen.snapshot().todos.items] == ["completed"]
    res = await frozen.do(Todo(edit=TodoEdit(action="toggle", index=0)))
    assert not res.ok and "the view is frozen" in res.message
    res = await FollowerFleet().do(Todo(edit=TodoEdit(action="add", content="x")))
    assert not res.ok and "takes no intents" in res.message

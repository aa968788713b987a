"""A todo edit from an attached TUI: POST /intents/todo to the collector, whose Fleet (the file's one writer)
makes it; a bad index is a 400 whose message comes back; the collector's snapshot carries the list."""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import test_utils, web

from ddtree_tui.collector.attach import AttachedFleet
from ddtree_tui.collector.intents import IntentRoutes
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.intents import Todo
from ddtree_tui.todo import TodoEdit


async def test_attached_fleet_sends_todo_edits_to_the_collectors_fleet(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    fleet = Fleet([], todos_path=p, history_path=tmp_path / "h.jsonl", telemetry=False)
    app = web.Application()
    IntentRoutes(fleet, "t" * 40, enabled=True).add_to(app)

    async def snapshot(_: web.Request) -> web.Response:
        return web.json_response(fleet.snapshot().to_json_dict())

    app.router.add_get("/snapshot", snapshot)
    server = test_utils.TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        url = str(server.make_url("")).rstrip("/")
        attached = AttachedFleet(url, token="t" * 40)
        res = await attached.do(Todo(edit=TodoEdit(action="add", content="bench dflash", priority="high")))
        assert res.ok, res.message
        res = await attached.do(Todo(edit=TodoEdit(action="toggle", index=0)))
        assert res.ok and res.message == "todo toggle: saved"
        res = await attached.do(Todo(edit=TodoEdit(action="edit", index=0, content="bench dflash twice")))
        assert res.ok, res.message
        items = json.loads(p.read_text())["todos"]
        assert [(t["content"], t["status"], t["priority"]) for t in items] == [
            ("bench dflash twice", "completed", "high")
        ]
        assert [it.content for it in fleet.snapshot().todos.items] == ["bench dflash twice"]
        assert [it.content for it in attached.snapshot().todos.items] == ["bench dflash twice"]  # read back
        res = await attached.do(Todo(edit=TodoEdit(action="delete", index=3)))
        assert not res.ok and "no item 4" in res.message
        wrong = await AttachedFleet(url, token="x" * 40).do(Todo(edit=TodoEdit(action="add", content="no")))
        assert not wrong.ok and wrong.suggestion == "attach with --token-file FILE"
        assert len(json.loads(p.read_text())["todos"]) == 1
    finally:
        await server.close()

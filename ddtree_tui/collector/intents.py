"""Intents over the collector's HTTP API (`serve --intents`): launch, kill, restart, move, bench and todo
edits, carried out by the collector's one Fleet through `do`. Off unless enabled; then every intent needs the
bearer token (from a 0600 file). The URL's verb is the intent's `kind` and the body its fields, parsed into
the same union the TUI and the CLI use (model/intents.py): a bad body is a 400 that says what is wrong."""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ddtree_tui.collector.limits import read_json_body
from ddtree_tui.fleet.protocol import Door
from ddtree_tui.model.events import Notice
from ddtree_tui.model.intents import AnyIntent, Bench, Outcome, Todo, parse_intent
from ddtree_tui.model.todo import TodoAction, TodoEdit

log = logging.getLogger(__name__)


class TodoBody(BaseModel):
    """A todo edit over HTTP; `done` is `complete` (the CLI's word)."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["add", "edit", "start", "done", "complete", "toggle", "cancel", "delete", "up", "down"]
    content: str | None = None
    index: int | None = Field(default=None, ge=0, description="0-based position, for all but add")
    priority: Literal["high", "medium", "low"] | None = None
    check: str | None = None

    def edit(self) -> TodoEdit:
        action: TodoAction = "complete" if self.action == "done" else self.action
        return TodoEdit(
            action=action, index=self.index, content=self.content, priority=self.priority, check=self.check
        )


class IntentResult(BaseModel):
    """The reply's body: an Outcome in words (its typed detail stays on the server)."""

    ok: bool
    message: str
    suggestion: str | None = None


def _parse(verb: str, body: object) -> AnyIntent:
    """The body as the typed intent; the todo body's `done` spelling is accepted here, at the face."""
    if verb == "todo":
        return Todo(edit=TodoBody.model_validate(body).edit())
    return parse_intent(verb, body)


class IntentRoutes:
    """POST /intents/{verb}; `fleet` is the collector's Fleet (its door)."""

    def __init__(self, fleet: Door, token: str | None, enabled: bool) -> None:
        self.fleet = fleet
        self.token = token
        self.enabled = enabled
        self._bench: asyncio.Task[None] | None = None

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/intents/{verb}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        if not self.enabled:
            return web.json_response(
                {"ok": False, "message": "intents are off on this collector (start it with serve --intents)"},
                status=403,
            )
        if self.token is None or not hmac.compare_digest(
            request.headers.get("Authorization", "").encode(), f"Bearer {self.token}".encode()
        ):
            return web.json_response({"ok": False, "message": "missing or wrong bearer token"}, status=401)
        verb = request.match_info["verb"]
        try:
            body = await read_json_body(request)  # size/depth bounds (collector/limits.py): a 400/413
        except ValueError:
            return web.json_response({"ok": False, "message": "the body is not JSON"}, status=400)
        try:
            res = await self._do(_parse(verb, body))
        except ValidationError as e:
            errs = "; ".join(f"{'.'.join(map(str, x['loc'])) or 'body'}: {x['msg']}" for x in e.errors())
            return web.json_response({"ok": False, "message": f"bad {verb} intent: {errs}"}, status=400)
        except KeyError:
            return web.json_response({"ok": False, "message": f"no intent {verb!r}"}, status=404)
        except (ValueError, IndexError) as e:  # an unknown host or service, a bad todo index
            return web.json_response({"ok": False, "message": str(e)}, status=400)
        if res.invalid:
            return web.json_response({"ok": False, "message": res.message}, status=400)
        reply = IntentResult(ok=res.ok, message=res.message, suggestion=res.suggestion)
        return web.json_response(reply.model_dump(), status=200)

    async def _do(self, intent: AnyIntent) -> Outcome:
        """A bench runs in the background (one at a time); every other intent is awaited."""
        if isinstance(intent, Bench):
            if self._bench is not None and not self._bench.done():
                return Outcome.refused("a benchmark is already running on this collector")
            self._bench = asyncio.create_task(self._run_bench(intent))
            p = intent.request
            if not p.refs:
                return Outcome(
                    ok=False, invalid=True, message="bad bench intent: refs: name at least one HOST/SVC"
                )
            return Outcome(ok=True, message=f"bench started: {p.prompt_set} on {', '.join(p.refs)}")
        res = await self.fleet.do(intent)
        if isinstance(intent, Todo) and res.ok:
            return res.model_copy(update={"message": f"todo {intent.edit.action}: saved"})
        return res

    async def _run_bench(self, intent: Bench) -> None:
        try:
            await self.fleet.do(intent)
        except Exception as e:
            self.fleet.publish(Notice(severity="error", text=f"bench failed: {e}"))

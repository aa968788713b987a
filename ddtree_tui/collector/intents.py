"""Intents over the collector's HTTP API (`serve --intents`): launch, kill, restart, move, bench and todo
edits, carried out by the collector's one Fleet. Off unless enabled; then every intent needs the bearer
token (from a 0600 file). Request bodies are pydantic models: a bad body is a 400 that says what is wrong."""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ddtree_tui.bench.models import BenchRequest
from ddtree_tui.events import Notice
from ddtree_tui.todo import TodoAction, TodoEdit

log = logging.getLogger(__name__)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServiceIntent(_Body):
    ref: str = Field(pattern=r"^[^/\s]+/[^/\s]+$", description="HOST/SVC")


class MoveIntent(ServiceIntent):
    to_host: str = Field(min_length=1)


class BenchIntent(BenchRequest):
    """The body of POST /intents/bench: the request the bench dialog builds (bench/models.py BenchRequest,
    its defaults), for services of this collector's fleet."""

    refs: list[str] = Field(min_length=1)


class TodoIntent(_Body):
    """A todo edit over HTTP; `done` is `complete` (the CLI's word). Carried out by Fleet.todo_apply."""

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
    ok: bool
    message: str
    suggestion: str | None = None


def _result(res: Any) -> IntentResult:
    return IntentResult(
        ok=bool(getattr(res, "ok", False)),
        message=str(getattr(res, "message", "") or ""),
        suggestion=getattr(res, "suggestion", None),
    )


class IntentRoutes:
    """POST /intents/{verb}; `fleet` is the collector's Fleet."""

    def __init__(self, fleet: Any, token: str | None, enabled: bool) -> None:
        self.fleet = fleet
        self.token = token
        self.enabled = enabled
        self._bench: asyncio.Task[Any] | None = None

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
            body = await request.json()
        except ValueError:
            return web.json_response({"ok": False, "message": "the body is not JSON"}, status=400)
        try:
            res = await self._do(verb, body)
        except ValidationError as e:
            errs = "; ".join(f"{'.'.join(map(str, x['loc'])) or 'body'}: {x['msg']}" for x in e.errors())
            return web.json_response({"ok": False, "message": f"bad {verb} intent: {errs}"}, status=400)
        except KeyError:
            return web.json_response({"ok": False, "message": f"no intent {verb!r}"}, status=404)
        except (ValueError, IndexError) as e:  # an unknown host or service, a bad todo index
            return web.json_response({"ok": False, "message": str(e)}, status=400)
        return web.json_response(res.model_dump(), status=200)

    async def _do(self, verb: str, body: Any) -> IntentResult:
        f = self.fleet
        if verb in ("launch", "kill", "restart"):
            ref = ServiceIntent.model_validate(body).ref
            return _result(await getattr(f, verb)(ref))
        if verb == "move":
            m = MoveIntent.model_validate(body)
            return _result(await f.move(m.ref, m.to_host))
        if verb == "bench":
            b = BenchIntent.model_validate(body)
            if self._bench is not None and not self._bench.done():
                return IntentResult(ok=False, message="a benchmark is already running on this collector")
            self._bench = asyncio.create_task(self._run_bench(b))
            return IntentResult(ok=True, message=f"bench started: {b.prompt_set} on {', '.join(b.refs)}")
        if verb == "todo":
            return await self._todo(TodoIntent.model_validate(body))
        raise KeyError(verb)

    async def _run_bench(self, b: BenchIntent) -> None:
        try:
            await self.fleet.run_bench(b)
        except Exception as e:
            self.fleet.publish(Notice(severity="error", text=f"bench failed: {e}"))

    async def _todo(self, t: TodoIntent) -> IntentResult:
        """The Fleet makes the change (it is the todo file's one writer); a bad index or value is a 400."""
        res = await self.fleet.todo_apply(t.edit())
        if res.invalid:
            raise ValueError(res.message)
        message = res.message if not res.ok else f"todo {t.action}: saved"
        return IntentResult(ok=res.ok, message=message, suggestion=res.suggestion)

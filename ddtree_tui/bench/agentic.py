"""Agentic sessions, closed loop (`--prompts agentic --sessions N [--turns T] [--think-time S]`).

N conversations run at once. Every session starts with the same system prompt (a shared prefix, as the
agents of one deployment share theirs), then its own task. Each turn sends the whole history; the model's
*actual* reply (the text it streamed, not a canned one) is appended as the assistant message, then a tool
result (a deterministic file read of growing size, as a coding agent's are) as the next user message, so the
context grows toward long contexts turn by turn and each turn's prompt extends the last: the prefix cache's
case. `--think-time S` waits S seconds between a reply and the next turn (the agent's own time).

A conversation dataset (`--prompts FILE.jsonl --sessions N`) in the common multi-turn shape is replayed turn
by turn: each line one conversation, `{"conversations": [{"from": "human"|"gpt"|"system", "value": ...}]}`
(ShareGPT) or `{"messages": [{"role": "user"|"assistant"|"system", "content": ...}]}`. Its user turns are sent
one by one; the history carries the model's actual replies (the dataset's assistant turns are not sent).

Per turn: TTFT, output tokens, prompt tokens, cached_tokens (the server's prefix-cache hits: /generate
`meta_info.cached_tokens`, chat `usage.prompt_tokens_details.cached_tokens`), accept length. Per session:
its completion time (first send → last reply, think time included) and turns done.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from ddtree_tui.bench.client import measure_request
from ddtree_tui.bench.loadmon import LoopMonitor, verdict
from ddtree_tui.bench.models import BenchRequest, BenchTarget, RequestResult
from ddtree_tui.bench.prompts import (
    _AGENT_SYSTEM,
    _AGENT_TASKS,
    Conversation,
    Prompt,
    _long_module,
    load_conversations,
)
from ddtree_tui.bench.results import AgenticRun, SessionResult, TurnResult
from ddtree_tui.bench.stream import StreamClient

DEFAULT_TURNS = 6


def tool_result(session: int, turn: int) -> str:
    """A deterministic tool result that grows with the turn (a file read), so contexts get long."""
    body = _long_module(4 + 4 * turn)
    return f"Tool result (read_file src/module_{session}_{turn}.py):\n```python\n{body}\n```\nContinue."


def built_in_conversations(n: int, turns: int) -> list[Conversation]:
    """n sessions over the agentic set's tasks, all with the same system prompt."""
    out = []
    for i in range(n):
        name, script = _AGENT_TASKS[i % len(_AGENT_TASKS)]
        first = script[0][0]
        users = [f"[session {i + 1}] {first}"] + [tool_result(i, k) for k in range(1, turns)]
        out.append(Conversation(id=f"s{i + 1}-{name}", system=_AGENT_SYSTEM, users=users))
    return out


async def _session(
    client: StreamClient,
    t: BenchTarget,
    conv: Conversation,
    req: BenchRequest,
    think: float,
    out: list[TurnResult],
    on_turn: Callable[[TurnResult], None] | None,
) -> SessionResult:
    history: list[dict[str, str]] = [{"role": "system", "content": conv.system}] if conv.system else []
    sp = req.sampling()
    t0 = time.monotonic()
    done = 0
    last_reply: str | None = None
    for k, user in enumerate(conv.users, start=1):
        if k > 1 and think > 0:
            await asyncio.sleep(think)
        history.append({"role": "user", "content": user})
        prompt = Prompt(id=f"{conv.id}.t{k}", messages=[dict(m) for m in history])
        reply: list[str] = []
        res: RequestResult = await measure_request(
            client, t, prompt, sp, seq=k, timeout=req.timeout, on_text=reply.append
        )
        text = reply[0] if reply else ""
        sent = prompt.as_text() if sp.api == "generate" else json.dumps(prompt.as_messages())
        tr = TurnResult(
            session=conv.id,
            service=t.ref,
            turn=k,
            ok=res.ok,
            error=res.error,
            ttft_ms=None if res.ttft_s is None else res.ttft_s * 1000,
            e2e_ms=None if res.e2e_s is None else res.e2e_s * 1000,
            output_tokens=res.output_tokens,
            prompt_tokens=res.prompt_tokens,
            cached_tokens=res.cached_tokens,
            accept_length=res.accept_length,
            prompt_chars=len(sent),
            reply_chars=len(text),
            reply_in_prompt=(last_reply in prompt.as_text()) if last_reply else None,
            started_at=res.started_at,
        )
        out.append(tr)
        if on_turn is not None:
            try:
                on_turn(tr)
            except Exception:  # a listener's bug must not end the session
                pass
        if not res.ok:
            return SessionResult(
                session=conv.id, service=t.ref, turns_done=done, turns_planned=len(conv.users), failed=True
            )
        done += 1
        history.append({"role": "assistant", "content": text})  # the model's own reply goes into the history
        last_reply = text
    return SessionResult(
        session=conv.id,
        service=t.ref,
        turns_done=done,
        turns_planned=len(conv.users),
        completion_s=time.monotonic() - t0,
    )


async def run_agentic(
    req: BenchRequest,
    targets: Sequence[BenchTarget],
    *,
    sessions: int,
    turns: int = DEFAULT_TURNS,
    think_time_s: float = 0.0,
    dataset: str | None = None,
    on_turn: Callable[[TurnResult], None] | None = None,
) -> AgenticRun:
    """Every service in turn (one after the other, so they never share the machine), N sessions at once."""
    if sessions < 1:
        raise ValueError("--sessions must be at least 1")
    if dataset:
        convs = load_conversations(dataset)
        convs = [convs[i % len(convs)] for i in range(sessions)]
        convs = [
            c.model_copy(update={"id": f"s{i + 1}-{c.id}", "users": c.users[:turns]})
            for i, c in enumerate(convs)
        ]
    else:
        convs = built_in_conversations(sessions, turns)
    started = datetime.now(UTC)
    t0 = time.monotonic()
    turn_results: list[TurnResult] = []
    session_results: list[SessionResult] = []
    mon = LoopMonitor()  # the client's own CPU and loop lag while the sessions run (a plain run's figures)
    async with StreamClient() as client:
        mon.start()
        for t in targets:
            session_results += await asyncio.gather(
                *(_session(client, t, c, req, think_time_s, turn_results, on_turn) for c in convs)
            )
        await mon.stop()
    tokens = sum(x.output_tokens or 0 for x in turn_results if x.ok)
    return AgenticRun(
        id=f"ag{int(time.time())}",
        started_at=started,
        wall_s=time.monotonic() - t0,
        source=dataset or "agentic",
        sessions=sessions,
        turns=max(len(c.users) for c in convs),
        think_time_s=think_time_s,
        turns_results=turn_results,
        session_results=session_results,
        failed=sum(1 for x in turn_results if not x.ok),
        client=verdict([mon.sample()], tokens, mon.wall_s),
    )

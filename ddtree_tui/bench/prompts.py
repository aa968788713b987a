"""Prompt sets: seed3 (the reference deployment's three prompts), agentic (multi-turn coding-agent
conversations whose history grows each turn), longctx (a few thousand tokens of context), FILE.jsonl, and
the workloads of bench/workloads/ (issue 26): gsp:G,P,SYS,Q[,OUT], sharegpt:FILE[,gpt-len], trace:FILE.

Each prompt carries chat messages; `/generate` gets them rendered with a ChatML-style template so the two
APIs see the same conversation. Acceptance differs a lot between code, prose and short answers, which is why
seed3 mixes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.bench.bounds import MAX_NEW_TOKENS, MAX_PROMPTS
from ddtree_tui.bench.workloads.base import WorkItem, WorkloadError
from ddtree_tui.bench.workloads.gsp import gsp_items, parse_gsp
from ddtree_tui.bench.workloads.sharegpt import sharegpt_items
from ddtree_tui.bench.workloads.trace import load_trace, trace_items

SETS = ("seed3", "agentic", "longctx")


class PromptError(ValueError):
    """A prompt set or file that cannot be used (names the file and line)."""


class Prompt(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    title: str = ""
    messages: list[dict[str, str]] = Field(default_factory=list)
    text: str | None = None  # raw text for /generate; rendered from messages when None
    max_new_tokens: int | None = Field(default=None, ge=1, le=MAX_NEW_TOKENS)  # overrides the run's value

    def as_text(self) -> str:
        if self.text is not None:
            return self.text
        return render_chatml(self.messages)

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages:
            return [dict(m) for m in self.messages]
        return [{"role": "user", "content": self.text or ""}]

    @property
    def approx_tokens(self) -> int:
        return max(1, math.ceil(len(self.as_text()) / 4))

    @property
    def turns(self) -> int:
        return max(1, sum(1 for m in self.messages if m.get("role") == "user"))


def render_chatml(messages: list[dict[str, str]]) -> str:
    """The Qwen chat template, enough for a benchmark: same conversation on /generate as on chat."""
    out = "".join(
        f"<|im_start|>{m.get('role', 'user')}\n{m.get('content', '')}<|im_end|>\n" for m in messages
    )
    return out + "<|im_start|>assistant\n"


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def seed3() -> list[Prompt]:
    """The three prompts of the reference deployment: code, prose, short answer."""
    return [
        Prompt(
            id="fibonacci",
            title="write a fibonacci function",
            messages=_user(
                "Write a Python function fibonacci(n) that returns the n-th Fibonacci number. "
                "Use an iterative approach, handle n = 0 and n = 1, and add a short docstring."
            ),
        ),
        Prompt(
            id="quicksort",
            title="explain quicksort",
            messages=_user(
                "Explain how the quicksort algorithm works, step by step: how the pivot is chosen, how the "
                "array is partitioned, and what its average and worst-case time complexity are."
            ),
        ),
        Prompt(
            id="math",
            title="short-answer math",
            messages=_user("What is 17 multiplied by 23? Answer with the number only."),
        ),
    ]


_AGENT_SYSTEM = (
    "You are a coding agent working in a Python repository. You can call tools by writing a JSON object "
    'on its own line: {"tool": "read_file", "path": ...}, {"tool": "run", "argv": [...]}, '
    '{"tool": "edit", "path": ..., "old": ..., "new": ...}. Think briefly, then act. When the task is done, '
    "say DONE and summarise the change in one paragraph."
)

_AGENT_TASKS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "agent-bugfix",
        [
            (
                "The test tests/test_stats.py::test_median fails with an IndexError for even-length lists. "
                "Find the bug and fix it.",
                '{"tool": "read_file", "path": "stats.py"}',
            ),
            (
                "Tool result (stats.py):\n```python\ndef median(xs):\n    s = sorted(xs)\n    n = len(s)\n"
                "    if n % 2:\n        return s[n // 2]\n    return (s[n // 2] + s[n // 2 + 1]) / 2\n```",
                '{"tool": "edit", "path": "stats.py", "old": "s[n // 2 + 1]", "new": "s[n // 2 - 1]"}',
            ),
            (
                "Tool result: edit applied. Now run the tests and tell me the outcome.",
                '{"tool": "run", "argv": ["pytest", "-q", "tests/test_stats.py"]}',
            ),
            ("Tool result:\n```\n....                                   [100%]\n4 passed in 0.03s\n```", ""),
        ],
    ),
    (
        "agent-feature",
        [
            (
                "Add a --json flag to the `report` command in cli.py that prints the report as JSON "
                "instead of a table.",
                '{"tool": "read_file", "path": "cli.py"}',
            ),
            (
                "Tool result (cli.py):\n```python\nimport argparse\n\nfrom report import build, table\n\n"
                "def main(argv=None):\n    p = argparse.ArgumentParser()\n    p.add_argument('path')\n"
                "    ns = p.parse_args(argv)\n    print(table(build(ns.path)))\n```",
                '{"tool": "edit", "path": "cli.py", "old": "    ns = p.parse_args(argv)", "new": '
                "\"    p.add_argument('--json', action='store_true')\\n    ns = p.parse_args(argv)\"}",
            ),
            (
                "Tool result: edit applied. Finish the change so --json prints json.dumps of the report, "
                "then write a test for it.",
                "",
            ),
        ],
    ),
]


def agentic() -> list[Prompt]:
    """One prompt per turn; turn N carries the whole history of turns 1..N-1 (prefix-cache friendly)."""
    out: list[Prompt] = []
    for name, turns in _AGENT_TASKS:
        history: list[dict[str, str]] = [{"role": "system", "content": _AGENT_SYSTEM}]
        for i, (user, reply) in enumerate(turns, start=1):
            history = [*history, {"role": "user", "content": user}]
            out.append(Prompt(id=f"{name}.t{i}", title=f"{name} turn {i}", messages=list(history)))
            if reply:
                history = [*history, {"role": "assistant", "content": reply}]
    return out


def _long_module(n_funcs: int) -> str:
    """Deterministic, realistic-looking source code to fill a long context."""
    parts = ['"""inventory.py: stock levels, reorder rules and reports for a small warehouse."""', ""]
    for i in range(n_funcs):
        parts.append(
            f"def reorder_rule_{i}(stock: dict[str, int], sku: str, minimum: int = {5 + i % 7}) -> int:\n"
            f'    """How many units of sku to reorder so that at least minimum remain (rule {i})."""\n'
            f"    have = stock.get(sku, 0)\n"
            f"    if have >= minimum:\n"
            f"        return 0\n"
            f"    batch = {10 + (i * 3) % 17}\n"
            f"    need = minimum - have\n"
            f"    return ((need + batch - 1) // batch) * batch\n"
        )
    return "\n".join(parts)


def longctx() -> list[Prompt]:
    """A few thousand tokens of context, then a question: prefill-heavy, tests TTFT and cache hits."""
    code = _long_module(48)
    return [
        Prompt(
            id="longctx-summary",
            title="summarise a long module",
            messages=_user(
                f"Here is a Python module:\n```python\n{code}\n```\n"
                "Summarise what this module does in five bullet points, then name the rule with the largest batch."
            ),
        ),
        Prompt(
            id="longctx-refactor",
            title="refactor a long module",
            messages=_user(
                f"Here is a Python module:\n```python\n{code}\n```\n"
                "The functions differ only in their constants. Rewrite the module as one function and a table "
                "of constants, keeping the behaviour identical."
            ),
        ),
    ]


def load_jsonl(path: Path | str) -> list[Prompt]:
    """One prompt a line: {"id"?, "prompt"|"text"|"messages", "max_new_tokens"?, "title"?}; # comments ok.
    At most MAX_PROMPTS prompts (bench/bounds.py): the file is read line by line and refused at the first
    prompt past the bound, so a huge file is never read whole."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as f:
            return _parse_jsonl(p, f)
    except FileNotFoundError:
        raise PromptError(f"{p}: prompt file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PromptError(f"{p}: cannot read prompt file: {e}") from None


def _parse_jsonl(p: Path, lines: Iterable[str]) -> list[Prompt]:
    out: list[Prompt] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            obj: Any = json.loads(s)
        except json.JSONDecodeError as e:
            raise PromptError(f"{p}:{n}: not a JSON object: {e.msg}") from None
        if not isinstance(obj, dict):
            raise PromptError(f"{p}:{n}: expected a JSON object")
        if len(out) >= MAX_PROMPTS:
            raise PromptError(f"{p}:{n}: more than {MAX_PROMPTS} prompts (the most a run takes)")
        pid = str(obj.get("id") or f"{p.stem}-{len(out) + 1}")
        if pid in seen:
            raise PromptError(f"{p}:{n}: prompt id {pid!r} is used twice")
        seen.add(pid)
        mnt = obj.get("max_new_tokens")
        if mnt is not None and (
            not isinstance(mnt, int) or isinstance(mnt, bool) or not 1 <= mnt <= MAX_NEW_TOKENS
        ):
            raise PromptError(f"{p}:{n}: max_new_tokens {mnt!r}: must be a whole number 1…{MAX_NEW_TOKENS}")
        msgs = obj.get("messages")
        title = str(obj.get("title") or "")
        if msgs is not None:
            if not isinstance(msgs, list) or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) for m in msgs
            ):
                raise PromptError(f"{p}:{n}: messages must be a list of {{role, content}} objects")
            clean = [{"role": str(m.get("role", "user")), "content": m["content"]} for m in msgs]
            out.append(Prompt(id=pid, title=title, messages=clean, max_new_tokens=mnt))
            continue
        text = obj.get("prompt", obj.get("text"))
        if not isinstance(text, str):
            raise PromptError(f"{p}:{n}: needs 'prompt', 'text' or 'messages'")
        key = "text" if "text" in obj and "prompt" not in obj else "prompt"
        # "text" is sent to /generate verbatim; "prompt" is a user message (templated for /generate)
        if key == "text":
            out.append(Prompt(id=pid, title=title, text=text, max_new_tokens=mnt))
        else:
            out.append(Prompt(id=pid, title=title, messages=_user(text), max_new_tokens=mnt))
    if not out:
        raise PromptError(f"{p}: no prompts in the file")
    return out


def load_prompts(spec: str, seed: int | None = None) -> list[Prompt]:
    """A set name, a workload (gsp:, sharegpt:, trace:; generated with `seed`) or a .jsonl path."""
    if spec.startswith(WORKLOAD_PREFIXES):
        return workload_prompts(spec, seed or 0)
    if spec == "seed3":
        return seed3()
    if spec == "agentic":
        return agentic()
    if spec == "longctx":
        return longctx()
    if spec.endswith(".jsonl") or Path(spec).is_file():
        return load_jsonl(spec)
    raise PromptError(f"unknown prompt set {spec!r} (expected {', '.join(SETS)} or a FILE.jsonl)")


class Conversation(BaseModel):
    """A session's script: the system prompt and the user turns (the first is the task)."""

    id: str
    system: str | None = None
    users: list[str]


_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def load_conversations(path: str | Path) -> list[Conversation]:
    """A multi-turn JSONL dataset: one conversation a line, `conversations` (ShareGPT `from`/`value`) or
    `messages` (`role`/`content`). PromptError names the file and the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PromptError(f"{p}: cannot read: {e.strerror or e}") from None
    out: list[Conversation] = []
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as e:
            raise PromptError(f"{p}:{n}: not JSON: {e.msg}") from None
        if not isinstance(obj, dict):
            raise PromptError(f"{p}:{n}: expected an object with conversations or messages")
        turns = obj.get("conversations", obj.get("messages"))
        if not isinstance(turns, list):
            raise PromptError(f"{p}:{n}: expected a conversations or messages list")
        system: str | None = None
        users: list[str] = []
        for j, m in enumerate(turns, start=1):
            if not isinstance(m, dict):
                raise PromptError(f"{p}:{n}: turn {j} is not an object")
            role = _ROLES.get(str(m.get("from", m.get("role", ""))).lower())
            content = m.get("value", m.get("content"))
            if role is None or not isinstance(content, str):
                raise PromptError(f"{p}:{n}: turn {j}: expected from/value or role/content (user, assistant)")
            if role == "system" and system is None and not users:
                system = content
            elif role == "user":
                users.append(content)
        if not users:
            raise PromptError(f"{p}:{n}: no user turn")
        out.append(Conversation(id=str(obj.get("id") or f"line{n}"), system=system, users=users))
    if not out:
        raise PromptError(f"{p}: no conversations")
    return out


# --- workloads (issue 26): generated and public-format prompt sources, bench/workloads/ -------------------------
WORKLOAD_PREFIXES = ("gsp:", "sharegpt:", "trace:")


def _from_item(w: WorkItem) -> Prompt:
    if w.raw:
        return Prompt(id=w.id, title=w.title, text=w.text, max_new_tokens=w.max_new_tokens)
    msgs = ([{"role": "system", "content": w.system}] if w.system is not None else []) + _user(w.text)
    return Prompt(id=w.id, title=w.title, messages=msgs, max_new_tokens=w.max_new_tokens)


def workload_prompts(spec: str, seed: int = 0) -> list[Prompt]:
    """`gsp:G,P,SYS,Q[,OUT]`, `sharegpt:FILE[,gpt-len]` or `trace:FILE` as prompts; PromptError names the
    file, line and field (or the spec)."""
    try:
        if spec.startswith("gsp:"):
            items = gsp_items(parse_gsp(spec), seed)
        elif spec.startswith("sharegpt:"):
            items = sharegpt_items(spec, seed)
        else:
            items = trace_items(load_trace(spec.partition(":")[2]), seed)
    except WorkloadError as e:
        raise PromptError(str(e)) from None
    return [_from_item(w) for w in items]

"""Agentic sessions, closed loop, on the simulator in a child process: the model's reply text is in the next
turn's prompt, cached_tokens rise across turns (the sim's prefix cache, reported where SGLang reports it:
meta_info.cached_tokens on /generate, usage.prompt_tokens_details.cached_tokens on chat), the shared system
prefix is a cache hit for another session; a multi-turn JSONL dataset (both shapes) replayed turn by turn;
a bad dataset line is named."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui.bench.agentic import load_conversations, run_agentic
from ddtree_tui.bench.models import BenchRequest, BenchTarget
from ddtree_tui.bench.prompts import PromptError
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess
from tests.util import free_port


def _sim() -> SimProcess:
    return SimProcess(SimConfig(algorithm="dflash", port=free_port(), accept_length=3.0, decode_rate=400.0))


@pytest.mark.slow
def test_agentic_sessions_carry_the_real_reply_and_hit_the_prefix_cache() -> None:
    with _sim() as sim:
        t = BenchTarget(ref="h/spec", base_url=sim.base_url, algorithm="dflash", mode="linear")
        run = asyncio.run(
            run_agentic(BenchRequest(max_new_tokens=24), [t], sessions=2, turns=4, think_time_s=0.05)
        )
    assert run.failed == 0 and len(run.turns_results) == 8
    for s in run.session_results:
        assert s.turns_done == 4 and s.completion_s is not None and not s.failed
    for sid in {x.session for x in run.turns_results}:
        turns = sorted((x for x in run.turns_results if x.session == sid), key=lambda x: x.turn)
        assert all(x.reply_chars > 0 for x in turns)
        # the model's actual reply of turn k is in the prompt of turn k + 1
        assert [x.reply_in_prompt for x in turns] == [None, True, True, True]
        cached = [x.cached_tokens for x in turns]
        prompt = [x.prompt_tokens for x in turns]
        assert all(c is not None for c in cached) and cached == sorted(cached) and cached[-1] > cached[1] > 0
        assert prompt == sorted(prompt) and prompt[-1] > 2 * prompt[0]  # grows toward long contexts
        # the whole previous prompt (and more) is a cache hit from turn 2 on
        assert all(c >= p for c, p in zip(cached[1:], prompt, strict=False))
    # sessions share the system prompt: the later of the two first turns finds it in the cache
    assert max(x.cached_tokens or 0 for x in run.turns_results if x.turn == 1) > 50
    assert run.cached_by_turn()[-1] > run.cached_by_turn()[1]


@pytest.mark.slow
def test_dataset_replayed_turn_by_turn_on_chat(tmp_path: Path) -> None:
    data = tmp_path / "conv.jsonl"
    sharegpt = {"id": "a", "conversations": [
        {"from": "system", "value": "You are terse."},
        {"from": "human", "value": "Name a prime."}, {"from": "gpt", "value": "7 (the dataset's reply)"},
        {"from": "human", "value": "Another one?"}, {"from": "gpt", "value": "11"},
    ]}  # fmt: skip
    messages = {"messages": [
        {"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "Again."},
    ]}  # fmt: skip
    data.write_text(json.dumps(sharegpt) + "\n# a comment\n" + json.dumps(messages) + "\n")
    convs = load_conversations(data)
    assert [c.users for c in convs] == [["Name a prime.", "Another one?"], ["Say hi.", "Again."]]
    assert convs[0].system == "You are terse." and convs[1].system is None
    with _sim() as sim:
        t = BenchTarget(ref="h/spec", base_url=sim.base_url, algorithm="dflash", mode="linear", model="m")
        run = asyncio.run(
            run_agentic(BenchRequest(max_new_tokens=16, api="chat"), [t], sessions=2, dataset=str(data))
        )
    assert run.failed == 0 and run.turns == 2 and len(run.turns_results) == 4
    second = [x for x in run.turns_results if x.turn == 2]
    assert all(x.reply_in_prompt for x in second)  # the model's reply, not the dataset's, went back
    assert all((x.cached_tokens or 0) > 0 for x in second)  # usage.prompt_tokens_details.cached_tokens


@pytest.mark.slow
def test_bad_dataset_line_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n{not json\n")
    with pytest.raises(PromptError, match=r"bad\.jsonl:2: not JSON"):
        load_conversations(bad)
    bad.write_text(json.dumps({"conversations": [{"from": "gpt", "value": "only a reply"}]}) + "\n")
    with pytest.raises(PromptError, match=r"bad\.jsonl:1: no user turn"):
        load_conversations(bad)
    argv = [sys.executable, "-m", "ddtree_tui.cli", "--run-bench", "--url", "http://127.0.0.1:9"]
    argv += ["--sessions", "2", "--prompts", str(bad)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert p.returncode == 2 and "bad.jsonl:1: no user turn" in p.stderr

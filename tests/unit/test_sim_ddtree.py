"""The simulator's DDTree model: accept length rising with budget (diminishing returns) and with top-k,
verify cost rising with budget and batch, the best budget shrinking as the batch grows, SGLANG_DDTREE_MAX_TOPK
read from the environment, and tree verify on a hybrid target refused at start unless allowed."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from ddtree_tui.cli.sim import _env_topk
from ddtree_tui.sim.config import (
    HYBRID_TREE_REFUSAL,
    SimConfig,
    ddtree_accept_length,
    ddtree_expected_speed,
    ddtree_step_factor,
)
from tests.util import free_port


def test_accept_length_rises_with_budget_with_diminishing_returns_and_with_topk() -> None:
    acc = [ddtree_accept_length(3.4, b, 2) for b in (4, 8, 16, 32, 64, 128)]
    assert all(b > a for a, b in itertools.pairwise(acc))
    gains = [b - a for a, b in itertools.pairwise(acc)]
    assert all(g2 < g1 for g1, g2 in itertools.pairwise(gains))
    at_large = [ddtree_accept_length(3.4, 256, k) for k in (1, 2, 4, 8)]
    assert all(b > a for a, b in itertools.pairwise(at_large))
    assert at_large[0] == pytest.approx(3.4, abs=0.01)  # top-k 1 is the chain
    assert at_large[2] - at_large[1] < at_large[1] - at_large[0]


def test_verify_cost_rises_with_budget_and_batch_and_the_best_budget_shrinks() -> None:
    assert ddtree_step_factor(16, 2, 1) < ddtree_step_factor(32, 2, 1) < ddtree_step_factor(32, 2, 8)
    assert ddtree_step_factor(32, 2, 1) < ddtree_step_factor(32, 4, 1)
    assert ddtree_step_factor(32, 4, 8, tree=False) < ddtree_step_factor(32, 4, 8)

    def best(batch: int) -> int:
        return max(
            (ddtree_expected_speed(3.4, b, k, batch), b) for b in (4, 8, 16, 32, 64) for k in (1, 2, 4)
        )[1]

    assert best(1) == 16 and best(16) < best(1)
    cfg = SimConfig(algorithm="ddtree", mode="tree", budget=16, max_topk=2, batch_slowdown=True)
    assert cfg.effective_accept_length == pytest.approx(ddtree_accept_length(3.4, 16, 2))
    assert cfg.step_seconds(8) > cfg.step_seconds(1) > 1 / cfg.decode_rate
    shadow = cfg.model_copy(update={"mode": "shadow-linear"})
    assert shadow.effective_accept_length == 3.4  # shadow-linear verifies the chain
    assert SimConfig(algorithm="ddtree", mode="tree").step_seconds(1) == 1 / 40.0  # no budget: no model


def test_topk_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_DDTREE_MAX_TOPK", raising=False)
    assert _env_topk() is None
    monkeypatch.setenv("SGLANG_DDTREE_MAX_TOPK", "8")
    assert _env_topk() == 8
    monkeypatch.setenv("SGLANG_DDTREE_MAX_TOPK", "eight")
    with pytest.raises(ValueError, match="SGLANG_DDTREE_MAX_TOPK must be an integer"):
        _env_topk()


def test_tree_on_hybrid_refused_at_start_unless_allowed() -> None:
    argv = [sys.executable, "-m", "ddtree_tui.cli", "sim", "--algorithm", "ddtree", "--mode", "tree",
            "--port", str(free_port()), "--load-time", "0", "--budget", "16", "--hybrid"]  # fmt: skip
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ})
    assert p.returncode == 1 and HYBRID_TREE_REFUSAL in p.stderr
    assert (
        SimConfig(algorithm="ddtree", mode="tree", hybrid=True, allow_hybrid_unsafe=True).startup_error()
        is None
    )
    assert SimConfig(algorithm="ddtree", mode="shadow-linear", hybrid=True).startup_error() is None

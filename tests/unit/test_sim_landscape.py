"""The simulator's landscape as a function (sim/landscape.py): the DFlash block/window and DDTree depth-bonus
knobs leave the model unchanged at their defaults, the demo's optimum moves with concurrency (verify cost
grows with the batch), speculation stops beating the baseline at a crossover, and the server follows the
same numbers (its config's accept length and step time)."""

from __future__ import annotations

import pytest

from ddtree_tui.sim import landscape as L
from ddtree_tui.sim.config import SimConfig, dflash_accept_length, dflash_step_factor


def test_defaults_unchanged_and_knobs_trade_off() -> None:
    assert dflash_accept_length(3.4) == pytest.approx(3.4)
    assert dflash_step_factor(16, None, 1) == dflash_step_factor(16, None, 32) == 1.0
    # longer blocks accept more, with diminishing returns, and cost more as the batch grows
    acc = [dflash_accept_length(3.4, b) for b in (4, 8, 16, 32)]
    assert acc == sorted(acc) and acc[3] - acc[2] < acc[1] - acc[0]
    assert dflash_step_factor(8, None, 32) < dflash_step_factor(8, None, 1) < 1 < dflash_step_factor(32)
    # a draft window costs acceptance and saves drafter time
    assert dflash_accept_length(3.4, 16, 256) < 3.4 and dflash_step_factor(16, 256) < 1.0
    deep = SimConfig(algorithm="ddtree", mode="tree", budget=8, max_topk=4, depth_bonus=1.0)
    flat = deep.model_copy(update={"depth_bonus": None})
    assert deep.effective_accept_length != flat.effective_accept_length


def test_demo_optimum_moves_with_concurrency_and_crosses_the_baseline() -> None:
    assert len(L.grid(L.DEMO_DIMS)) >= 60
    at1, v1 = L.optimum(L.DEMO_BASE, L.DEMO_DIMS, 1)
    at32, v32 = L.optimum(L.DEMO_BASE, L.DEMO_DIMS, 32)
    assert at1 != at32 and int(at32["budget"]) < int(at1["budget"])
    assert int(at32["block_size"]) <= int(at1["block_size"])
    assert v1 > v32
    c = L.crossover(L.DEMO_BASE, L.DEMO_DIMS)
    assert c is not None and 8 < c <= 1024
    base = L.baseline_of(L.DEMO_BASE)
    _o, below = L.optimum(L.DEMO_BASE, L.DEMO_DIMS, c)
    assert below <= L.value(L.expected(base, c), "tok_s")


def test_expected_is_what_the_server_config_says() -> None:
    cfg = L.config_for(L.DEMO_BASE, {"budget": "8", "env.SGLANG_DDTREE_MAX_TOPK": "3", "block_size": "12"})
    assert (cfg.budget, cfg.max_topk, cfg.block_size) == (8, 3, 12)
    e = L.expected(cfg, 4)
    assert e.tok_s == pytest.approx(cfg.effective_accept_length / cfg.step_seconds(4))
    assert e.throughput == pytest.approx(4 * e.tok_s)
    win = L.config_for(L.DEMO_BASE, {"--speculative-dflash-draft-window-size": "1024"})
    assert win.draft_window == 1024
    with pytest.raises(ValueError, match="not modelled"):
        L.config_for(L.DEMO_BASE, {"mem_fraction_static": "0.8"})

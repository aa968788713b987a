"""Snapshot tests (pytest-textual-snapshot) of the main screen, help, the bench during a run and the confirm
dialog at 80x24, 120x40, 160x48 and 200x60 (from 140x40 up every pane is on one screen). Deterministic: a
StaticFleet frozen at one instant, no clocks, no cursor blink.
Update with `pytest tests/app/test_snapshots.py --snapshot-update` after checking the new SVGs by eye."""

from __future__ import annotations

from typing import Any

import pytest

from ddtree_tui.bench.models import PromptFinished, PromptStarted, RequestResult, RunStarted, TokensReceived
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.widgets.bench import BenchPane
from tests.app.snapdata import T0, static_fleet

pytestmark = pytest.mark.slow  # 11 full-screen SVG renders: seconds each on a 2-core machine

SIZES = [(80, 24), (120, 40), (160, 48), (200, 60)]
IDS = ["80x24", "120x40", "160x48", "200x60"]


def _app() -> DDTreeApp:
    return DDTreeApp(static_fleet(), demo=True)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_main_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), terminal_size=size)


# the help dialog is 95 % wide up to 120 columns: at 160x48 it is the 200x60 one, less tall; 120x40 sits
# between 80x24's and the full width. Its two ends are what can differ
@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=["80x24", "200x60"])
def test_help_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), press=["question_mark"], terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_confirm_dialog(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), press=["ctrl+k"], terminal_size=size)  # kill is ctrl+k (issue 28)


async def _bench_running(pilot: Any) -> None:
    """Two services, seed3: one prompt done, one streaming, one waiting."""
    app: DDTreeApp = pilot.app
    live = app.query_one(BenchPane).live
    live.apply(RunStarted(run_id="snap", total=4, targets=[], prompts=["p1", "p2"]))
    for seq, (ref, prompt) in enumerate((("local/dflash", "p1"), ("local/ddtree-shadow", "p1"))):
        live.apply(PromptStarted(run_id="snap", service=ref, prompt_id=prompt, repeat=0, seq=seq))
    result = RequestResult(
        service="local/dflash", algorithm="dflash", mode=None, prompt_id="p1", repeat=0, seq=0,
        started_at=T0, ttft_s=0.041, output_tokens=128, tok_s=139.6, accept_length=3.41,
    )  # fmt: skip
    live.apply(PromptFinished(run_id="snap", result=result, done=1, total=4))
    live.apply(
        TokensReceived(
            run_id="snap", service="local/ddtree-shadow", prompt_id="p1", repeat=0, seq=1, tokens=57,
            elapsed_s=0.39, tok_s=146.2,
        )
    )  # fmt: skip
    await pilot.press("5")
    app._dirty.add("bench")
    app.flush()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"])
def test_bench_during_a_run(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), run_before=_bench_running, terminal_size=size)

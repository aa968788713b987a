"""Snapshot tests (pytest-textual-snapshot) of the main screen, help and the confirm dialog at 80x24 and
160x48. Deterministic: a StaticFleet frozen at one instant, no clocks, no cursor blink.
Update with `pytest tests/app/test_snapshots.py --snapshot-update` after checking the new SVGs by eye."""

from __future__ import annotations

import pytest

from ddtree_tui.ui.app import DDTreeApp
from tests.app.snapdata import static_fleet

SIZES = [(80, 24), (160, 48)]


def _app() -> DDTreeApp:
    return DDTreeApp(static_fleet(), demo=True)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
def test_main_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
def test_help_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), press=["question_mark"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
def test_confirm_dialog(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), press=["k"], terminal_size=size)

"""One request, one set of defaults (issue 29): the TUI's bench dialog and `--run-bench` build the same
BenchRequest (a plain run) and the same ShapeRequest (a load ladder) for the same choices, with the
README's 256 new tokens; the request reaches the fleet as that one object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from ddtree_tui.bench.models import DEFAULT_MAX_NEW_TOKENS, BenchRequest, ShapeRequest
from ddtree_tui.cli import build_parser
from ddtree_tui.cli.args import BenchArgs
from ddtree_tui.cli.bench import build_request
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.bench_setup import BenchSetupScreen
from tests.app.screen_text import until
from tests.app.snapdata import static_fleet


async def _from_dialog(fields: dict[str, str]) -> BenchRequest:
    """Open the dialog (b) on the one ready service, type `fields`, run (ctrl+r): what reached the fleet."""
    fleet = static_fleet()
    got: list[BenchRequest] = []

    async def capture(req: BenchRequest, *_: object) -> Any:  # (req) or (req, stop): the stop event K2 added
        got.append(req)
        raise RuntimeError("captured")

    fleet.run_bench = capture  # type: ignore[method-assign]
    fleet.run_load_shape = capture  # type: ignore[attr-defined]
    app = DDTreeApp(fleet, demo=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, BenchSetupScreen)
        for field, text in fields.items():
            inp = app.screen.query_one(f"#{field}", Input)
            inp.focus()
            await pilot.press(*text)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: bool(got), 10, "the request to reach the fleet")
    return got[0]


def _from_cli(tmp_path: Path, *args: str) -> BenchRequest:
    prof = tmp_path / "local.toml"
    prof.write_text(
        'name = "local"\naddress = "local"\n[[service]]\nname = "dflash"\nlauncher = "sim"\nport = 31010\n'
    )
    ns = build_parser().parse_args(
        ["--run-bench", "--profile", str(prof), "--services", "local/dflash", *args]
    )
    return build_request(BenchArgs.of(ns), ["local/dflash"])


@pytest.mark.slow
async def test_the_dialog_and_run_bench_build_the_same_plain_request(tmp_path: Path) -> None:
    tui = await _from_dialog({})
    cli = _from_cli(tmp_path, "--prompts", "seed3")
    assert type(tui) is BenchRequest and type(cli) is BenchRequest
    assert tui == cli, (tui, cli)
    assert tui.max_new_tokens == DEFAULT_MAX_NEW_TOKENS == 256 and tui.refs == ["local/dflash"]


@pytest.mark.slow
async def test_the_dialog_and_run_bench_build_the_same_load_request(tmp_path: Path) -> None:
    tui = await _from_dialog({"load": "concurrency:1,2", "requests": "4"})
    cli = _from_cli(tmp_path, "--load", "concurrency:1,2", "--requests", "4")
    assert type(tui) is ShapeRequest and type(cli) is ShapeRequest
    assert tui == cli, (tui, cli)
    assert (
        tui.max_new_tokens == DEFAULT_MAX_NEW_TOKENS and tui.load == "concurrency:1,2" and tui.requests == 4
    )

"""Issue 26's --run-bench options: every one a BenchArgs field (argparse would drop one silently otherwise),
and turned into the run's one request with its defaults: durations parsed, a soak's --slice its window."""

from __future__ import annotations

import pytest

from ddtree_tui.bench.load import LoadError
from ddtree_tui.bench.models import BenchRequest, ShapeRequest
from ddtree_tui.cli import build_parser, hoist_globals
from ddtree_tui.cli.args import BenchArgs
from ddtree_tui.cli.bench import build_request


def _req(*argv: str) -> BenchRequest:
    ns = build_parser().parse_args(hoist_globals(["--run-bench", *argv]))
    return build_request(BenchArgs.of(ns), refs=["h/a"])


def test_every_option_of_the_group_is_a_field() -> None:
    group = next(
        g for g in build_parser()._action_groups if (g.title or "").startswith("time slices, server")
    )
    dests = {a.dest for a in group._group_actions}
    assert dests == {"slice", "server_metrics", "server_metrics_every", "flush_cache", "saturation_test",
                     "saturation_alpha", "saturation_window", "slices_csv"}  # fmt: skip
    assert dests <= set(BenchArgs.model_fields)


def test_options_become_the_request() -> None:
    plain = _req()
    assert (plain.slice_s, plain.server_metrics, plain.server_metrics_every_s, plain.flush_cache) == (
        None, False, 2.0, False
    )  # fmt: skip
    r = _req("--slice", "5s", "--server-metrics", "--server-metrics-every", "500ms", "--flush-cache")
    assert (r.slice_s, r.server_metrics, r.server_metrics_every_s, r.flush_cache) == (5.0, True, 0.5, True)
    ladder = _req("--load", "rate:2,4", "--saturation-test", "either", "--saturation-alpha", "0.01",
                  "--saturation-window", "25")  # fmt: skip
    assert isinstance(ladder, ShapeRequest)
    assert (ladder.saturation_test, ladder.saturation_alpha, ladder.saturation_window) == ("either", 0.01, 25)
    assert _req("--load", "rate:2").saturation_test == "fixed"  # the rule the ladder always had
    soak = _req("--soak", "--duration", "1m", "--slice", "15s")
    assert isinstance(soak, ShapeRequest) and soak.soak and soak.window_s == 15.0
    with pytest.raises(LoadError, match="--slice on a soak is its --window"):
        _req("--soak", "--duration", "1m", "--slice", "15s", "--window", "10s")
    with pytest.raises(LoadError, match="for --load ladders"):
        _req("--saturation-alpha", "0.01")

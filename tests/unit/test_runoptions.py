"""Issue 26's run options have one copy of their rules (bench/runoptions.py): `--run-bench` refuses what the
bench dialog refuses, in the same words, and both turn the same values into the same request fields."""

from __future__ import annotations

import pytest

from ddtree_tui.bench.load import LoadError
from ddtree_tui.bench.models import BenchRequest, ShapeRequest
from ddtree_tui.bench.runoptions import run_options, soak_window
from ddtree_tui.cli import build_parser, hoist_globals
from ddtree_tui.cli.args import BenchArgs
from ddtree_tui.cli.bench import build_request


def _req(*argv: str) -> BenchRequest:
    ns = build_parser().parse_args(hoist_globals(["--run-bench", *argv]))
    return build_request(BenchArgs.of(ns), refs=["h/a"])


def _words(kind: str, **kw: object) -> str:
    with pytest.raises(LoadError) as e:
        run_options(kind, **kw)  # type: ignore[arg-type]
    return str(e.value)


@pytest.mark.parametrize(
    ("argv", "kind", "kw"),
    [
        (["--spec-details"], "plain", {"spec_details": True}),
        (["--saturation-test", "trend"], "plain", {"saturation_test": "trend"}),
        (["--energy", "--soak", "--duration", "30s"], "soak", {"energy": True}),
        (["--energy", "--sessions", "2"], "agentic", {"energy": True}),
        (["--slice", "5x"], "plain", {"slice_text": "5x"}),
        (["--server-metrics-every", "0"], "plain", {"server_metrics_every": "0"}),
    ],
)
def test_the_cli_refuses_in_the_shared_words(argv: list[str], kind: str, kw: dict[str, object]) -> None:
    with pytest.raises(LoadError) as e:
        _req(*argv)
    assert str(e.value) == _words(kind, **kw)


def test_the_same_values_make_the_same_fields() -> None:
    r = _req("--api", "chat", "--spec-details", "--energy", "--slice", "2s", "--server-metrics",
             "--server-metrics-every", "0.5", "--flush-cache", "--seed", "7")  # fmt: skip
    got = run_options("plain", api="chat", spec_details=True, energy=True, slice_text="2s", server_metrics=True,
                      server_metrics_every="0.5", flush_cache=True, seed="7")  # fmt: skip
    assert {k: getattr(r, k) for k in got} == got
    assert run_options("load", saturation_test="either")["saturation_test"] == "either"
    assert _words("plain", seed="-1").startswith("--seed '-1'")
    # a soak's slices are its windows: one width
    soak = _req("--soak", "--duration", "10s", "--slice", "2s")
    assert isinstance(soak, ShapeRequest) and soak.window_s == 2.0 == soak_window(2.0, None)
    with pytest.raises(LoadError, match="--slice on a soak is its --window"):
        _req("--soak", "--duration", "10s", "--slice", "2s", "--window", "3s")

"""The rules of issue 26's run options, one copy for every face: `--run-bench`'s options (cli/bench.py) and the
TUI's bench dialog (ui/screens/bench_setup.py) both turn what was given into BenchRequest / ShapeRequest
fields here (GPU energy, per-request spec details, time slices, server metrics, the cache reset, the
statistical over-saturation test, the seed), so the two cannot drift apart. A bad value is a LoadError that
names the option; a value the models bound (alpha, window, seconds) is still checked by the models."""

from __future__ import annotations

from typing import Literal

from ddtree_tui.bench.load import LoadError, parse_duration

RunKind = Literal["plain", "load", "soak", "agentic"]
SATURATION_TESTS = ("fixed", "trend", "either")


def run_options(
    kind: RunKind,
    *,
    api: str = "generate",
    energy: bool = False,
    spec_details: bool = False,
    slice_text: str | None = None,
    server_metrics: bool = False,
    server_metrics_every: str | None = None,
    flush_cache: bool = False,
    saturation_test: str | None = None,
    saturation_alpha: float | None = None,
    saturation_window: int | None = None,
    seed: str | int | None = None,
) -> dict[str, object]:
    """The request fields of these options for a run of `kind` (blank / None: not given, the model's default).
    LoadError with the option's name when one is wrong or does not fit the run."""
    out: dict[str, object] = {"energy": energy, "spec_details": spec_details}
    out |= {"server_metrics": server_metrics, "flush_cache": flush_cache}
    if energy and kind in ("soak", "agentic"):
        raise LoadError(
            "--energy is for plain runs and --load ladders (a soak probes its GPUs every window already)"
        )
    if spec_details and api == "generate":
        raise LoadError(
            "--spec-details asks the OpenAI APIs (--api chat or completions) for SGLang's per-request spec "
            "details; /generate returns each request's accept length in meta_info without it"
        )
    if slice_text is not None and str(slice_text).strip():
        out["slice_s"] = parse_duration(str(slice_text), "--slice")
    if server_metrics_every is not None and str(server_metrics_every).strip():
        out["server_metrics_every_s"] = parse_duration(str(server_metrics_every), "--server-metrics-every")
    test = (saturation_test or "").strip()
    if test or saturation_alpha is not None or saturation_window is not None:
        if kind in ("plain", "agentic"):
            raise LoadError(
                "--saturation-test, --saturation-alpha and --saturation-window are for --load ladders"
            )
        if test:
            if test not in SATURATION_TESTS:
                raise LoadError(f"--saturation-test {test!r}: one of {', '.join(SATURATION_TESTS)}")
            out["saturation_test"] = test
        if saturation_alpha is not None:
            out["saturation_alpha"] = saturation_alpha
        if saturation_window is not None:
            out["saturation_window"] = saturation_window
    if isinstance(seed, int):
        out["seed"] = seed
    elif seed is not None and seed.strip():
        if not seed.strip().isdigit():
            raise LoadError(f"--seed {seed.strip()!r}: a whole number, 0 or more")
        out["seed"] = int(seed.strip())
    return out


def soak_window(slice_s: object, window_s: float | None) -> float:
    """A soak's slices are its windows (one option, one width): the window width for `--slice` `slice_s`
    when the soak's own window is `window_s` (None: not given). LoadError when the two differ."""
    width = float(slice_s)  # type: ignore[arg-type]  # run_options' slice_s: a float
    if window_s is not None and window_s != width:
        raise LoadError("--slice on a soak is its --window: give one of them (or the same)")
    return width


__all__ = ["SATURATION_TESTS", "RunKind", "run_options", "soak_window"]

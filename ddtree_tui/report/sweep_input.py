"""A sweep's results.json (and the sweep.json next to it) read for the report, and what varies in it.

Apart from report/sweep.py (the page) and report/sweep_charts.py (its charts), which both read these.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ddtree_tui.report.runs import ReportInputError, read_input, validated
from ddtree_tui.sweep.results import RESULTS_SCHEMA, SweepResults
from ddtree_tui.sweep.state import SweepState


class LoadedSweep(BaseModel):
    """A sweep to report: its results, its state when found next to them, and where they came from."""

    model_config = ConfigDict(frozen=True)

    path: str
    results: SweepResults
    state: SweepState | None = None

    @property
    def simulated(self) -> bool:
        if self.state is not None:
            return any(p.versions.get("simulated") for p in self.state.points)
        return any(c.startswith("SIMULATED") for c in self.results.caveats)


def is_sweep_results(obj: object) -> bool:
    """Whether a parsed JSON object is (meant to be) a sweep's results.json."""
    return isinstance(obj, dict) and "sweep_id" in obj and "points" in obj


def _parse_sweep(obj: dict[str, Any], path: str) -> LoadedSweep:
    """The sweep in `obj` (read from `path`); ReportInputError names the file and what is wrong."""
    res = validated(
        SweepResults,
        obj,
        path,
        schema=RESULTS_SCHEMA,
        kind="sweep results",
        invalid="not valid sweep results",
    )
    state = None
    sp = Path(path).parent / "sweep.json"
    if sp.is_file():
        try:
            cand = SweepState.model_validate_json(sp.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cand = None  # the manifest says it could not be read
        if cand is not None and cand.id == res.sweep_id:
            state = cand
    return LoadedSweep(path=path, results=res, state=state)


def load_sweep(path: str) -> LoadedSweep:
    """Read `path` (a results.json) as a sweep; ReportInputError names the file."""
    text = read_input(path, "a results.json file")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise ReportInputError(
            f"{path}: not JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from None
    if not is_sweep_results(obj):
        raise ReportInputError(f'{path}: not sweep results (expected "sweep_id" and "points")')
    return _parse_sweep(obj, path)


def sort_values(vals: Sequence[str]) -> list[str]:
    """Numbers in numeric order, anything else as given."""
    try:
        return sorted(vals, key=float)
    except ValueError:
        return list(vals)


def varying(ls: LoadedSweep) -> list[tuple[str, list[str]]]:
    """The dimensions that take more than one value, with their values (the state's order when known)."""
    pts = ls.results.points
    order: list[str] = []
    if ls.state is not None:
        order = [d.key for d in ls.state.dims]
    order += [k for p in pts for k in p.overrides if k not in order]
    out = []
    for k in order:
        vals = list(dict.fromkeys(p.overrides[k] for p in pts if k in p.overrides))
        if len(vals) > 1:
            out.append((k, sort_values(vals)))
    return out


def objective_unit(res: SweepResults) -> str:
    """The objective's unit: TTFT in ms, the throughput objectives in tok/s."""
    return "ms" if res.objective == "ttft" else "tok/s"

"""The files a sweep leaves beside its state: `results.json` and `results.csv`, written the same way (atomically,
from one analysis) by the headless `sweep` mode and the TUI's Sweep screen, so a sweep started from either
leaves the same directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddtree_tui.sweep import results as rs
from ddtree_tui.sweep import state as st


def write_results(
    out: Path, state: st.SweepState, constraints: Sequence[str] | None = None, objective: str | None = None
) -> rs.SweepResults:
    """Analyse `state` and write its results.json and results.csv into `out`; the analysis is returned."""
    res = rs.analyse(state, constraints, objective)
    st.atomic_write(out / "results.json", res.model_dump_json(indent=1, by_alias=True))
    st.atomic_write(out / "results.csv", rs.to_csv(res))
    return res

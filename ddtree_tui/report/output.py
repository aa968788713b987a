"""A report's outputs: the HTML file (written atomically through remote/atomicio.py) and the terminal text.
Shared by `ddtree-tui report` (cli/report.py) and `--run-bench --html`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddtree_tui.bench.models import BenchRun, dump
from ddtree_tui.remote.atomicio import write_file
from ddtree_tui.report.runs import LoadedRun


def write_output(path: Path | str, text: str) -> None:
    """Write `text` to `path`: atomically for a regular file or a new path (its directory created, mode 644);
    directly for a device or FIFO (/dev/stdout), which a rename would replace with a regular file."""
    p = Path(path)
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    write_file(p, text, mode=0o644)


def write_html(runs: Sequence[LoadedRun], path: Path | str) -> int:
    """Render and write the HTML report; returns its size in bytes."""
    from ddtree_tui.report.html import render  # matplotlib and the templates: only when a report is written
    from ddtree_tui.report.serverhtml import sections  # issue 26: slices, server metrics, flushes

    text = render(runs, [x for lr in runs for x in sections(lr.run)])
    write_output(path, text)
    return len(text.encode("utf-8"))


def html_for_run(run: BenchRun, path: Path | str, source: str | None = None) -> int:
    """The HTML report of a run just measured (`--run-bench --html FILE`); returns its size in bytes."""
    lr = LoadedRun(path=source or f"run {run.id}", label="A", run=run, raw=dump(run))
    return write_html([lr], path)


def terminal_text(runs: Sequence[LoadedRun]) -> str:
    """One run: its table and verdicts; several: the aligned comparison."""
    from ddtree_tui.report.compare import comparison_table, single_run_text

    return single_run_text(runs[0]) if len(runs) == 1 else comparison_table(runs)

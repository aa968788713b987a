"""`ddtree-tui report RUN.json [RUN2.json ...] [--html FILE]`: the aligned table on stdout (one run: its
table and verdicts), and with --html one self-contained HTML file.

Exit codes: 0 done; 1 the HTML could not be written; 2 an input is missing or not a run JSON (the message
names the file).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from ddtree_tui.cli.args import ReportArgs
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, err, handler
from ddtree_tui.report.loadhtml import shape_runs_in, shape_text, write_load_html
from ddtree_tui.report.output import terminal_text, write_html
from ddtree_tui.report.runs import ReportInputError, load_runs
from ddtree_tui.report.sweep import write_html as write_sweep_html
from ddtree_tui.report.sweep_input import is_sweep_results, load_sweep
from ddtree_tui.sweep.results import table


def _err(msg: str) -> None:
    err(msg, "report")


def _html(path: str | None, write: Callable[[str], int]) -> int:
    """`--html FILE`, when given: write it and say its size; exit 1 when it cannot be written."""
    if not path:
        return EXIT_OK
    try:
        size = write(path)
    except OSError as e:
        _err(f"cannot write {path}: {e.strerror or e}")
        return EXIT_FAIL
    print(f"wrote {path} ({size / 1024:.0f} KiB)", file=sys.stderr, flush=True)
    return EXIT_OK


def _sweep_main(args: ReportArgs) -> int | None:
    """A sweep's results.json is reported on its own (report/sweep.py); None when no input is one."""
    found: list[str] = []
    for p in args.runs:
        try:
            with open(p, encoding="utf-8") as f:
                head = json.load(f)
        except (OSError, ValueError):
            continue  # load_runs / load_sweep say what is wrong with it
        if is_sweep_results(head):
            found.append(p)
    if not found:
        return None
    if len(args.runs) > 1:
        _err(f"{found[0]}: a sweep's results are reported on their own, not with other files")
        return EXIT_USAGE
    try:
        ls = load_sweep(found[0])
    except ReportInputError as e:
        _err(str(e))
        return EXIT_USAGE
    print(table(ls.results), flush=True)
    return _html(args.html_out, lambda path: write_sweep_html(ls, path))


def _shapes_main(args: ReportArgs) -> int | None:
    """One load / soak / agentic run's JSON, or a history file with such runs: their tables (and with --html
    the page of the one run); None when the input is not one (read as plain runs)."""
    runs = shape_runs_in(args.runs[0]) if len(args.runs) == 1 else None
    if not runs:
        return None
    for run in runs:
        sys.stdout.write(shape_text(run) + ("\n" if len(runs) > 1 else ""))
    sys.stdout.flush()
    if not args.html_out:
        return EXIT_OK
    last = runs[-1]
    if len(runs) > 1:
        _err(f"{args.runs[0]}: --html takes one load, soak or agentic run's JSON (--run-bench … --json FILE)")
        return EXIT_USAGE
    return _html(args.html_out, lambda path: write_load_html(last, path))


def _mixed_main(ns: ReportArgs) -> int | None:
    """Several files of which some are load, soak or agentic runs (schema 2): the plain runs compared as
    always, then each other run's table under its file's name; None when every file is a plain run. Every
    kind of run this version writes can be read back beside the others."""
    if len(ns.runs) < 2:
        return None
    shapes = {p: shape_runs_in(p) for p in ns.runs}
    if not any(shapes.values()):
        return None
    plain = [p for p in ns.runs if not shapes[p]]
    try:
        runs = load_runs(plain) if plain else []
    except ReportInputError as e:
        _err(str(e))
        return EXIT_USAGE
    if ns.html_out and not runs:
        _err("--html with several files takes plain runs (one load or soak run: report FILE --html PAGE)")
        return EXIT_USAGE
    if runs:
        sys.stdout.write(terminal_text(runs) + "\n")
    for p in ns.runs:
        for run in shapes[p] or []:
            sys.stdout.write(f"{p}: {run.kind} run {run.id}\n{shape_text(run)}\n")
    sys.stdout.flush()
    return _html(ns.html_out, lambda path: write_html(runs, path)) if runs else EXIT_OK


@handler("report", ReportArgs)
def cli_main(args: ReportArgs) -> int:
    sweep = _sweep_main(args)
    if sweep is not None:
        return sweep
    shapes = _shapes_main(args)
    if shapes is not None:
        return shapes
    mixed = _mixed_main(args)
    if mixed is not None:
        return mixed
    try:
        runs = load_runs(list(args.runs))
    except ReportInputError as e:
        _err(str(e))
        return EXIT_USAGE
    sys.stdout.write(terminal_text(runs))
    sys.stdout.flush()
    return _html(args.html_out, lambda path: write_html(runs, path))

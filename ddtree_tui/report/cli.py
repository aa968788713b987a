"""`ddtree-tui report RUN.json [RUN2.json ...] [--html FILE]`: the aligned table on stdout (one run: its
table and verdicts), and with --html one self-contained HTML file.

Exit codes: 0 done; 1 the HTML could not be written; 2 an input is missing or not a run JSON (the message
names the file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ddtree_tui.bench.models import BenchRun, dump
from ddtree_tui.report.runs import LoadedRun, ReportInputError, load_runs

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def write_output(path: Path | str, text: str) -> None:
    """Write `text` to `path`: atomically (temp file + rename) for a regular file or a new path; directly
    for anything else (/dev/stdout, a FIFO), which a rename would replace with a regular file."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "is a directory", str(p))
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        return
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            with contextlib.suppress(OSError):
                os.chmod(tmp, stat.S_IMODE(st.st_mode))
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_html(runs: Sequence[LoadedRun], path: Path | str) -> int:
    """Render and write the HTML report; returns its size in bytes."""
    from ddtree_tui.report.html import render

    text = render(runs)
    write_output(path, text)
    return len(text.encode("utf-8"))


def html_for_run(run: BenchRun, path: Path | str, source: str | None = None) -> int:
    """The HTML report of a run just measured (`--run-bench --html FILE`); returns its size in bytes."""
    lr = LoadedRun(path=source or f"run {run.id}", label="A", run=run, raw=dump(run))
    return write_html([lr], path)


def terminal_text(runs: Sequence[LoadedRun]) -> str:
    from ddtree_tui.report.compare import comparison_table, single_run_text

    return single_run_text(runs[0]) if len(runs) == 1 else comparison_table(runs)


def _err(msg: str) -> None:
    print(f"ddtree-tui report: {msg}", file=sys.stderr, flush=True)


def _write(path: str, write: Callable[[], int]) -> int:
    """Run an HTML writer (it returns the size in bytes) and say what it wrote, or why it could not."""
    try:
        size = write()
    except OSError as e:
        _err(f"cannot write {path}: {e.strerror or e}")
        return EXIT_FAIL
    print(f"wrote {path} ({size / 1024:.0f} KiB)", file=sys.stderr, flush=True)
    return EXIT_OK


def _sweep_main(ns: argparse.Namespace) -> int | None:
    """A sweep's results.json is reported on its own (report/sweep.py); None when no input is one."""
    from ddtree_tui.report.sweep import is_sweep_results, load_sweep

    found: list[str] = []
    for p in ns.runs:
        try:
            with open(p, encoding="utf-8") as f:
                head = json.load(f)
        except (OSError, ValueError):
            continue  # load_runs / load_sweep say what is wrong with it
        if is_sweep_results(head):
            found.append(p)
    if not found:
        return None
    if len(ns.runs) > 1:
        _err(f"{found[0]}: a sweep's results are reported on their own, not with other files")
        return EXIT_USAGE
    try:
        ls = load_sweep(found[0])
    except ReportInputError as e:
        _err(str(e))
        return EXIT_USAGE
    from ddtree_tui.sweep.results import table

    print(table(ls.results), flush=True)
    if ns.html_out:
        from ddtree_tui.report.sweep import write_html as write_sweep_html

        return _write(ns.html_out, lambda: write_sweep_html(ls, ns.html_out))
    return EXIT_OK


def _shapes_main(ns: argparse.Namespace) -> int | None:
    """One load / soak / agentic run's JSON, or a history file with such runs: their tables (and with --html
    the page of the one run); None when the input is not one (read as plain runs)."""
    from ddtree_tui.report.loadhtml import shape_runs_in, shape_text, write_load_html

    runs = shape_runs_in(ns.runs[0]) if len(ns.runs) == 1 else None
    if not runs:
        return None
    for run in runs:
        sys.stdout.write(shape_text(run) + ("\n" if len(runs) > 1 else ""))
    sys.stdout.flush()
    if ns.html_out:
        last = runs[-1]
        if len(runs) > 1 or last.kind == "agentic":
            _err(f"{ns.runs[0]}: --html takes one load or soak run's JSON (--run-bench --load … --json FILE)")
            return EXIT_USAGE
        return _write(ns.html_out, lambda: write_load_html(last, ns.html_out))
    return EXIT_OK


def cli_main(ns: argparse.Namespace) -> int:
    sweep = _sweep_main(ns)
    if sweep is not None:
        return sweep
    shapes = _shapes_main(ns)
    if shapes is not None:
        return shapes
    try:
        runs = load_runs(list(ns.runs))
    except ReportInputError as e:
        _err(str(e))
        return EXIT_USAGE
    sys.stdout.write(terminal_text(runs))
    sys.stdout.flush()
    if ns.html_out:
        return _write(ns.html_out, lambda: write_html(runs, ns.html_out))
    return EXIT_OK

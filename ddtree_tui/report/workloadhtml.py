"""The Workload section of a load run's HTML report (issue 26): the trace replayed and its prefix-cache
hits, each level's schedule planned vs done (sends on time and late, lag, rates, concurrency), and the
requests the client cancelled, in the sentences of `bench/workloads/record.describe`, which also end the
run's table (bench/tables.py): the page and the terminal show the same figures."""

from __future__ import annotations

from ddtree_tui.bench.results import LoadRun
from ddtree_tui.bench.workloads.record import describe
from ddtree_tui.report.html import e


def workload_section(run: LoadRun) -> list[str]:
    """The section's HTML lines; none when the run used no workload option."""
    if run.workload is None:
        return []
    return [
        "<h2>Workload</h2>",
        "<p>Lag: a request's start on the client minus its planned send time (on time: at most 10 ms). "
        "Cancelled requests are counted apart: not failures, not in the latency figures.</p>",
        '<ul class="verdicts">',
        *(f"<li>{e(line)}</li>" for line in describe(run.workload)),
        "</ul>",
    ]

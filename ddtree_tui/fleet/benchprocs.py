"""The bench client's worker processes, as a headless run starts them: `--run-bench` forks their zygote
(bench/zygote.py) before its event loop and any thread start, so each worker its run needs is a fork of a
process that has the stream client imported, not a new Python that imports it (~0.3 s of CPU each; issue 26).
Faces reach the bench engine through the fleet: this is that door for the one thing a face must do before
its loop."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.models import BenchRequest, ShapeRequest

AUTO = 0  # BenchRequest.workers: choose (bench/worker.py AUTO, not imported before it is needed)


def may_start_workers(req: BenchRequest | ShapeRequest, cores: int | None = None) -> bool:
    """Whether the run may start worker processes: `--workers N>1`, or auto with more than one request in
    flight at some point and more than two usable cores (bench/worker.py plan_workers never plans a second
    process for one request at a time, nor beyond the usable cores but one). An unused zygote costs a fork and
    an exit (~20 ms of CPU here), so a run that cannot use one forks none."""
    if req.workers != AUTO:
        return req.workers > 1
    if cores is None:
        from ddtree_tui.bench.worker import usable_cores

        cores = usable_cores()
    if cores - 1 <= 1:
        return False
    if isinstance(req, ShapeRequest):
        if req.sessions or req.trace:
            return True
        spec = parse_load(req.load)
        if spec.kind == "sync":
            return False
        return spec.kind != "concurrency" or max(spec.levels) > 1
    return req.concurrency > 1


@contextlib.contextmanager
def worker_zygote(req: BenchRequest | ShapeRequest) -> Iterator[bool]:
    """Around the run's event loop: the zygote forked when the run may start worker processes (not for
    `--workers 1` or one request at a time), ended and waited for after it. Yields whether it forked."""
    if not may_start_workers(req):
        yield False
        return
    # imported before the fork (the runner imports them anyway): what every worker shares
    from ddtree_tui.bench.worker import forked_main
    from ddtree_tui.bench.zygote import forked_zygote

    with forked_zygote(forked_main) as forked:
        yield forked

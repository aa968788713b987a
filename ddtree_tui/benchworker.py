"""A bench worker process's entry point: `python -m ddtree_tui.benchworker` (bench/worker.py starts it).

Outside the bench package on purpose. A worker's start is CPU that every run pays once per process (16 of
them at c=256, issue 26), so a worker imports only the stream client: bench/worker.py, bench/client.py
(`measure_raw`), bench/stream.py, bench/timeline.py, bench/loadmon.py, bench/evloop.py, bench/sse.py. The
runner builds each request's bytes and turns what the worker measured into a RequestResult
(bench/worker.py), so no request or result model is imported here (the package's `__init__` loads its
exports only when asked for). The one model a worker validates is bench/stream.py's StreamLimits; pydantic
looks for plugins before it builds the first validator of a process, reading the entry points of every
installed distribution (about 0.1 s here), so a worker starts with pydantic's plugins off
(PYDANTIC_DISABLE_PLUGINS, pydantic's own switch; a user's setting of it is kept).
DDTREE_BENCH_WORKER_BOOT=plain starts a worker with plugins looked for, as any process: a side-by-side
measurement of the start.

`python -m ddtree_tui.benchworker --zygote` is the process that imports this once and forks each worker from
then on (bench/zygote.py; its control socket is its stdin), where the run's process could not fork one itself.
"""

from __future__ import annotations

import os
import sys

BOOT_ENV = "DDTREE_BENCH_WORKER_BOOT"


def main() -> None:
    if os.environ.get(BOOT_ENV) != "plain":
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if sys.argv[1:] == ["--zygote"]:
        from ddtree_tui.bench.worker import forked_main
        from ddtree_tui.bench.zygote import serve_stdin

        sys.exit(serve_stdin(forked_main))
    from ddtree_tui.bench.worker import main as worker_main

    worker_main()


if __name__ == "__main__":
    main()

"""What issue 26 adds around any run, whichever engine measures it (the fleet's bench desk wraps every run
kind in it, so a plain run, a load ladder, a soak and agentic sessions get the same): the cache reset before
the run and before each load level (`flush_cache`, cacheflush.py), the server's /metrics scraped while it
runs (`server_metrics`, servermetrics.py, with the Decode batch log as the fallback), and afterwards the time
slices (`slice_s`, slices.py) and the server's figures cut by the same windows, all recorded on the run.

With `server_metrics` and no `slice_s`, the windows are DEFAULT_WINDOW_S long (the client's slices are computed
too, so the server's figures always have the client's beside them); a soak's windows are its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ddtree_tui.bench.cacheflush import flush_all
from ddtree_tui.bench.load import LoadSpec, Slo
from ddtree_tui.bench.models import BenchRequest, BenchRun, BenchTarget
from ddtree_tui.bench.results import AgenticRun, LoadRun, SoakRun, SoakWindow
from ddtree_tui.bench.runner import RunHooks
from ddtree_tui.bench.servermetrics import LogLines, ScrapeTarget, ServerScrape, window_edges
from ddtree_tui.bench.slices import slice_run, soak_edges, span_of
from ddtree_tui.bench.windows import CacheFlush

DEFAULT_WINDOW_S = 10.0

AnyRunLike = BenchRun | LoadRun | SoakRun | AgenticRun


class RunExtras:
    """One run's issue-26 extras; `logs(ref)` follows a service's log (None: a server with no log to
    follow, e.g. `--url`)."""

    def __init__(
        self,
        req: BenchRequest,
        targets: Sequence[BenchTarget],
        logs: Callable[[str], LogLines | None] | None = None,
        slo: Slo | None = None,
    ) -> None:
        self.req = req
        self.targets = list(targets)
        self.logs = logs
        self.slo = slo
        self.flushes: list[CacheFlush] = []
        self.scrape: ServerScrape | None = None
        self.soak_origin: float | None = (
            None  # unix time a soak's measuring began (its windows count from it)
        )

    @property
    def active(self) -> bool:
        r = self.req
        return bool(r.flush_cache or r.server_metrics or r.slice_s)

    async def flush(self, before: str) -> list[CacheFlush]:
        """Reset every target's cache (when asked), recorded on the run."""
        if not self.req.flush_cache:
            return []
        got = await flush_all([(t.ref, t.base_url, t.headers) for t in self.targets], before)
        self.flushes += got
        return got

    def hooks(self, hooks: RunHooks, load: LoadSpec | None = None) -> RunHooks:
        """`hooks` with a flush before each load level after the first (the desk flushed before the first)
        and a soak's origin: when its measuring began (on_measure_start)."""
        inner_recheck, inner_event = hooks.recheck, hooks.on_event
        levels = list(load.levels) if load is not None else []
        count = [0]

        async def recheck() -> str | None:
            # the identity check first: a listener that is no longer ours gets no flush (issue 29)
            why = await inner_recheck() if inner_recheck is not None else None
            if why is not None:
                return why
            count[0] += 1
            k = count[0]
            label = load.label(levels[k]) if load is not None and k < len(levels) else f"level {k + 1}"
            await self.flush(f"level {label}")
            return None

        def on_event(ev: Any) -> None:
            if isinstance(ev, SoakWindow) and self.soak_origin is None:  # a runner that does not say it
                self.soak_origin = time.time() - ev.end_s
            if inner_event is not None:
                inner_event(ev)

        def on_measure_start(t: float) -> None:
            # the soak's own origin, not the first window's event less its end_s: that event comes after the
            # window's lines are appended to disk, which on a busy machine put the origin late enough to move
            # a scrape of window 0 before its start (the server then counted fewer requests than the client)
            self.soak_origin = t
            if hooks.on_measure_start is not None:
                hooks.on_measure_start(t)

        return dataclasses.replace(
            hooks,
            recheck=recheck if self.req.flush_cache else inner_recheck,
            on_event=on_event,
            on_measure_start=on_measure_start,
        )

    @contextlib.asynccontextmanager
    async def scraping(self) -> AsyncIterator[None]:
        """The server's /metrics scraped while the body runs (when asked)."""
        if not self.req.server_metrics:
            yield
            return
        targets = [
            ScrapeTarget(
                ref=t.ref,
                base_url=t.base_url,
                headers=dict(t.headers),
                logs=self.logs(t.ref) if self.logs else None,
            )
            for t in self.targets
        ]
        async with ServerScrape(targets, self.req.server_metrics_every_s) as sc:
            self.scrape = sc
            yield

    def attach(self, run: AnyRunLike) -> AnyRunLike:
        """The run with its flushes, slices and server figures recorded."""
        width = self.req.slice_s or (DEFAULT_WINDOW_S if self.req.server_metrics else None)
        update: dict[str, object] = {"cache_flushes": [*run.cache_flushes, *self.flushes]}
        if isinstance(run, SoakRun):
            origin = self.soak_origin if self.soak_origin is not None else run.started_at.timestamp()
            if self.scrape is not None:
                edges = window_edges(max(run.wall_s or 0.0, 1e-3), run.window_s)
                update["server_metrics"] = self.scrape.result(origin, edges, soak_edges(run))
        elif width is not None:
            sliced = slice_run(run, width, self.slo)
            update["slices"] = sliced
            if self.scrape is not None:
                origin = run.started_at.timestamp()
                update["server_metrics"] = self.scrape.result(
                    origin, window_edges(span_of(run, origin), width)
                )
        for k, v in update.items():
            setattr(run, k, v)
        return run

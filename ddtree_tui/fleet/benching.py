"""The fleet's bench desk: targets from the fleet's services, plain runs, load shapes (ladders, soaks,
agentic sessions), the soak's GPU probe from the fleet's own telemetry, and the bench history. One run at a
time (its lock); every engine event is published as BenchEventWrap.

Moved here from fleet.py as it was (issue 24): the bench side rewrites this orchestration (one BenchRequest
built at the face) and replaces this module; until then its logic is kept unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ddtree_tui.fleet.hosts import Hosts
from ddtree_tui.model.events import BenchEventWrap, FleetEvent, Notice
from ddtree_tui.model.snapshot import FleetSnapshot

if TYPE_CHECKING:
    from ddtree_tui.bench.agentic import AgenticRun
    from ddtree_tui.bench.loadrun import LoadRun
    from ddtree_tui.bench.models import BenchRun, BenchTarget
    from ddtree_tui.bench.soak import GpuProbe, GpuWindow, SoakRun


class Benching:
    """Bench runs over the fleet's services; `history_path` is where runs are appended."""

    def __init__(
        self,
        hosts: Hosts,
        publish: Callable[[FleetEvent], None],
        snapshot: Callable[[], FleetSnapshot],
        history_path: Path,
    ) -> None:
        self._hosts = hosts
        self._publish = publish
        self._snapshot = snapshot
        self.history_path = history_path
        self._bench_lock = asyncio.Lock()
        self.bench_running = False

    async def bench_targets(self, refs: Sequence[str]) -> list[BenchTarget]:
        from ddtree_tui.bench.models import BenchTarget

        targets = []
        for ref in refs:
            h, svc = self._hosts.split(ref)
            spec = h.spec(svc)
            base = await h.services.base_url(svc)
            targets.append(
                BenchTarget(ref=ref, base_url=base, algorithm=spec.algorithm, mode=spec.display_mode)
            )
        return targets

    async def run_bench(
        self,
        refs: Sequence[str],
        prompt_set: str = "seed3",
        repeats: int = 1,
        max_new_tokens: int = 128,
        baseline: str | None = None,
        warmup: int = 1,
        **request: object,
    ) -> BenchRun:
        from ddtree_tui.bench import history
        from ddtree_tui.bench.models import BenchRequest
        from ddtree_tui.bench.runner import run_bench

        async with self._bench_lock:
            self.bench_running = True
            try:
                targets = await self.bench_targets(refs)
                req = BenchRequest.model_validate(
                    {
                        "prompts": prompt_set,
                        "repeats": repeats,
                        "warmup": warmup,
                        "max_new_tokens": max_new_tokens,
                        "baseline": baseline or (refs[0] if refs else None),
                        **request,
                    }
                )
                run = await run_bench(
                    req, targets, on_event=lambda ev: self._publish(BenchEventWrap(event=ev))
                )
                history.append(self.history_path, run)
                return run
            finally:
                self.bench_running = False

    async def run_load_shape(
        self,
        refs: Sequence[str],
        load: str = "sweep",
        *,
        requests: int | None = None,
        duration_s: float | None = None,
        slo: str | None = None,
        soak: bool = False,
        window_s: float = 10.0,
        sessions: int | None = None,
        turns: int = 6,
        think_time_s: float = 0.0,
        max_new_tokens: int = 128,
        baseline: str | None = None,
        warmup: int = 1,
    ) -> LoadRun | SoakRun | AgenticRun:
        """A `--load` ladder, a soak or agentic sessions, as headless runs them (bench/loadrun.py, soak.py,
        agentic.py); every engine event is published as BenchEventWrap. LoadError for bad `load`/`slo`."""
        from ddtree_tui.bench import history
        from ddtree_tui.bench.agentic import run_agentic
        from ddtree_tui.bench.load import parse_load, parse_slo
        from ddtree_tui.bench.loadrun import LoadSettings, run_load
        from ddtree_tui.bench.models import BenchRequest
        from ddtree_tui.bench.runner import RunHooks
        from ddtree_tui.bench.soak import SoakSettings, run_soak, sim_gpu_probe

        spec = parse_load(load)
        slo_m = parse_slo(slo) if slo else None

        def publish(ev: object) -> None:  # engine events and agentic turns
            self._publish(BenchEventWrap(event=ev))

        async with self._bench_lock:
            self.bench_running = True
            try:
                targets = await self.bench_targets(refs)
                req = BenchRequest(
                    prompts="seed3",
                    warmup=warmup,
                    max_new_tokens=max_new_tokens,
                    baseline=baseline or (refs[0] if refs else None),
                )
                run: LoadRun | SoakRun | AgenticRun
                if sessions:
                    run = await run_agentic(
                        req,
                        targets,
                        sessions=sessions,
                        turns=turns,
                        think_time_s=think_time_s,
                        on_turn=publish,
                    )
                elif soak:
                    soak_settings = SoakSettings(
                        duration_s=duration_s or 60.0,
                        window_s=window_s,
                        slo=slo_m,
                        gpu_probe=self._soak_gpu_probe(sim_gpu_probe),
                        history_path=self.history_path,  # windows appended as they come
                    )
                    run = await run_soak(req, targets, spec, soak_settings, RunHooks(on_event=publish))
                else:
                    load_settings = LoadSettings(requests=requests, duration_s=duration_s, slo=slo_m)
                    run = await run_load(req, targets, spec, load_settings, RunHooks(on_event=publish))
                try:
                    history.append_shape(run, self.history_path)
                except OSError as e:
                    self._publish(Notice(severity="warning", text=f"bench history not written: {e}"))
                return run
            finally:
                self.bench_running = False

    def _soak_gpu_probe(self, sim_probe: GpuProbe) -> GpuProbe:
        """A soak's GPU probe from this fleet's own telemetry (the host's latest samples of the service's
        GPUs); the simulator's modelled GPU for a simulated service."""
        from ddtree_tui.bench.soak import gpu_windows

        async def probe(t: BenchTarget) -> tuple[list[GpuWindow], str | None]:
            host, svc = self._hosts.split(t.ref)
            spec = host.spec(svc)
            if spec.launcher == "sim":
                return await sim_probe(t)
            view = self._snapshot().host(host.profile.name)
            return gpu_windows(view.gpus if view else [], spec.gpus), host.profile.telemetry.source

        return probe

    def bench_history(self) -> list[BenchRun | LoadRun | SoakRun | AgenticRun]:
        """The last plain runs (read incrementally) and load / soak / agentic runs, oldest first."""
        from ddtree_tui.bench import history

        try:
            plain: list[BenchRun | LoadRun | SoakRun | AgenticRun] = list(
                history.load_tail(self.history_path)
            )
            runs = plain + list(history.load_shapes(self.history_path))
            return sorted(runs, key=lambda r: r.started_at)[-history.RECENT_RUNS :]
        except Exception as e:
            self._publish(Notice(severity="warning", text=f"bench history unreadable: {e}"))
            return []

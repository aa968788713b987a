"""The fleet's bench desk: every benchmark, whichever face asked for it (the TUI, `--run-bench`, the
collector), is run here, from one BenchRequest / ShapeRequest, with the same defaults and the same rules.

What the desk does: turn the request's services into targets (127.0.0.1 for a local host, a port forwarded
through the host's own SSH transport otherwise, a running server by URL for `--url`), leave out a service
that is not running (stopped or crashed) with a word, the same rule for a plain run and a load shape, check
each target's identity (issue 29, fleet/identity.py: a port held by anything but the process group we
launched is refused, or measured with `force` and recorded as forced; a load ladder asks again before each
level), record it on the run, run the engine (bench/runner.py, loadrun.py, soak.py, agentic.py) with its
events published on the fleet, probe a soak's GPUs, and append the run to the bench history.

`--url` targets are a kind of their own here, not a made-up host profile: a URL names a server we neither
launched nor watch, may be https or another machine, and its results are named host:port as they always
were; what it runs comes from its own /server_info.

It needs a few things of the fleet, named by the `BenchFleet` Protocol (fleet/bench_targets.py, with the
`--url` targets, the report manifest and the soak's GPU probes), so it can be tested without the rest of `Fleet`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from ddtree_tui.bench import history
from ddtree_tui.bench.acceptance import summarize
from ddtree_tui.bench.agentic import run_agentic
from ddtree_tui.bench.load import LoadSpec, Slo, parse_load, parse_slo
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.models import BenchRequest, BenchRun, BenchTarget, RunFinished, ShapeRequest
from ddtree_tui.bench.results import AnyRun, LoadFinished, LoadRun, ShapeRun
from ddtree_tui.bench.runextras import RunExtras
from ddtree_tui.bench.runner import Gate, RunHooks, run_bench, with_model
from ddtree_tui.bench.servermetrics import LogLines
from ddtree_tui.bench.soak import GpuProbe, SoakSettings, run_soak
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.bench.windows import CacheFlush
from ddtree_tui.config import HostProfile
from ddtree_tui.fleet.bench_energy import EnergyFleet, GpuRecorder, finish, finish_load, url_energy
from ddtree_tui.fleet.bench_targets import BenchFleet, gpu_probe, manifest, url_targets
from ddtree_tui.fleet.identity import FORCE_HINT, changed, forced, last_identities, served_identity, stamp
from ddtree_tui.model.events import BenchEventWrap, Notice
from ddtree_tui.model.identity import TargetIdentity

R = TypeVar("R", bound=BenchRequest)
NOT_RUNNING = frozenset({"stopped", "crashed"})  # no server of ours behind the port: never measured


class BenchRefused(RuntimeError):
    """Nothing to measure (every service left out), or a service that cannot be reached; the words say why."""


class _HeldFinish:
    """The engine's events, published as they come, except the finished-run event (RunFinished,
    LoadFinished), held until the desk has attached what it adds after the engine (acceptance, energy,
    slices, server figures, cache flushes): a face that shows the finished run sees them (issue 26).
    `release` publishes what was held, also when the run ends by an exception (a stop, a cancel)."""

    def __init__(self, publish: Callable[[object], None]) -> None:
        self.publish = publish
        self.held: list[object] = []

    def __call__(self, ev: object) -> None:
        if isinstance(ev, RunFinished | LoadFinished):
            self.held.append(ev)
        else:
            self.publish(ev)

    def release(self) -> None:
        held, self.held = self.held, []
        for ev in held:
            self.publish(ev)


class BenchDesk:
    """One benchmark at a time on a fleet (a second waits for the first); see the module docstring."""

    def __init__(self, fleet: BenchFleet) -> None:
        self.fleet = fleet
        self._lock = asyncio.Lock()
        self.running = False
        self.gates: dict[str, Gate] = {}  # by ref: services behind an SSH forward wait out a dropped link
        self.where: dict[str, str] = {}  # by ref: the route, for connection errors
        self.identities: dict[str, TargetIdentity] = {}  # by ref: what the last targets() saw (issue 29)

    def _word(self, text: str) -> None:
        """Something a user should hear (a service left out, a host that dropped): a warning Notice."""
        self.fleet.publish(Notice(severity="warning", text=text))

    def _publish(self, ev: object) -> None:
        self.fleet.publish(BenchEventWrap(event=ev))

    # --- targets -------------------------------------------------------------------------------------------
    def runnable(self, refs: Sequence[str], force: bool = False) -> tuple[list[str], list[str]]:
        """(the services to measure, the words for those left out): a service the fleet sees stopped or
        crashed has no server of ours behind its port, so it is never measured (whatever answers there)
        unless `force` (then the identity check says who answers, and the run records it as forced)."""
        snap = self.fleet.snapshot()
        keep: list[str] = []
        words: list[str] = []
        for ref in refs:
            host, _, svc = ref.partition("/")
            st = snap.service(host, svc)
            if st is not None and st.state in NOT_RUNNING and not force:
                words.append(f"{ref} left out: the service is {st.state}")
            else:
                keep.append(ref)
        return keep, words

    async def targets(self, req: BenchRequest) -> list[BenchTarget]:
        """The request's targets; services that are not running are left out with a word (a Notice on the
        fleet). BenchRefused when nothing is left or a service cannot be reached."""
        self.identities = {}
        if req.urls:
            found = await url_targets(req.urls)
            await self._identify_urls(found)
            return self._with_identity(found)
        refs, words = self.runnable(req.refs, req.force)
        refs, refused = await self._identified(refs, req.force)
        words += refused
        for w in words:
            self._word(w)
        if not refs:
            raise BenchRefused(
                "nothing to benchmark: "
                + ("every service named is left out" if words else "no service named")
            )
        out: list[BenchTarget] = []
        for ref in refs:
            host, spec = self.fleet.spec_of(ref)
            try:
                base = await self.fleet.service_url(ref)
            except Exception as e:
                raise BenchRefused(f"cannot reach {ref} (port {spec.port} on {host.name}): {e}") from None
            if not host.is_local:
                self.where[ref] = f"{base} forwarded to port {spec.port} on {host.name} over ssh"
                self.gates[ref] = self._reconnect_gate(host)
            out.append(
                BenchTarget(
                    ref=ref, base_url=base, algorithm=spec.algorithm, mode=spec.display_mode,
                    model=spec.served_model_name, **manifest(host, spec),
                )
            )  # fmt: skip
        return self._with_identity(out)

    def _with_identity(self, targets: Sequence[BenchTarget]) -> list[BenchTarget]:
        """Each target carrying what its check saw: every engine's run records it (TargetInfo.identity)."""
        return [t.model_copy(update={"identity": self.identities.get(t.ref)}) for t in targets]

    async def _identified(self, refs: Sequence[str], force: bool) -> tuple[list[str], list[str]]:
        """(the refs whose listener is the service named, the words for those refused): issue 29's target
        identity, checked before anything is sent. With `force` a refused one is kept, recorded as forced."""
        keep: list[str] = []
        words: list[str] = []
        previous = last_identities(self.history())
        for ref in refs:
            ident = await self.fleet.identify(ref)
            why = ident.refusal()
            if why is not None and not force:
                words.append(f"{ref} left out: {why} ({FORCE_HINT})")
                continue
            if why is not None:
                ident = forced(ident)
                words.append(f"{ref} measured with --force: {ident.reason}; recorded as forced, not verified")
            self._remember(ident, previous.get(ref))
            keep.append(ref)
        return keep, words

    async def _identify_urls(self, targets: Sequence[BenchTarget]) -> None:
        """A --url server's identity is what its /server_info says; a change since the last run is said."""
        previous = last_identities(self.history())
        for t in targets:
            self._remember(await served_identity(t.ref, t.base_url, "url"), previous.get(t.ref))

    def _remember(self, ident: TargetIdentity, prev: TargetIdentity | None) -> None:
        diff = changed(prev, ident)
        if diff is not None:
            ident = ident.model_copy(update={"changed": diff})
            self._word(f"{ident.ref} changed since its last run: {diff}")
        self.identities[ident.ref] = ident

    def _stamped(self, run: AnyRun) -> AnyRun:
        """The run with the identity of each target it measured (every run records what it saw)."""
        stamp(run, list(self.identities.values()))
        return run

    async def bench_targets(self, refs: Sequence[str]) -> list[BenchTarget]:
        """The targets of `refs` (the fleet's `bench_targets`)."""
        return await self.targets(BenchRequest(refs=list(refs)))

    def _reconnect_gate(self, host: HostProfile) -> Gate:
        """Hold a request while the host's SSH connection is down, up to a bound: a short drop costs a wait,
        not the run's plan (the forward's local port survives the reconnect)."""
        bound = max(30.0, 3 * host.connect_timeout)
        t = self.fleet.transport(host.name)

        async def gate() -> str | None:
            if t.status.state == "connected":
                return None
            why = t.status.error or "connection lost"
            self._word(
                f"host {host.name} disconnected ({why}): waiting up to {bound:.0f} s for the reconnect"
            )
            if await t.wait_connected(bound):
                self._word(f"host {host.name} reconnected; going on")
                return None
            return f"host {host.name} still unreachable after {bound:.0f} s"

        return gate

    def _hooks(
        self, stop: asyncio.Event | None, on_event: Callable[[object], None] | None = None
    ) -> RunHooks:
        return RunHooks(
            on_event=on_event or self._publish, gates=self.gates, where=self.where, stop=stop,
            recheck=self._recheck,
        )  # fmt: skip

    async def _recheck(self) -> str | None:
        """Before each load level after the first: is every launched target still the service checked at
        the start? The reason to stop the ladder when one is not (a forced target is not re-asked)."""
        for ref, before in self.identities.items():
            if before.kind != "launched" or before.forced:
                continue
            now = await self.fleet.identify(ref)
            if not now.verified:
                self._word(f"{ref}: {now.reason}; the load ladder stops before its next level")
                return f"target identity lost: {now.reason}"
        return None

    # --- runs ----------------------------------------------------------------------------------------------
    async def run_bench(self, req: BenchRequest, stop: asyncio.Event | None = None) -> BenchRun:
        """A plain run of `req` (deltas against the first service unless it names a baseline), appended to
        the history."""
        async with self._lock:
            self.running = True
            held = _HeldFinish(self._publish)  # RunFinished goes out once the run carries its extras
            try:
                targets = await self.targets(req)
                req = self._with_baseline(req, targets)
                rec = self._recorder(req, targets)  # issue 26 (W-GPU): the GPUs' samples through the run
                extras = self._extras(req, targets)  # issue 26 (w-server): flush, scrape, slices
                await extras.flush("run")
                async with extras.scraping():
                    run = await run_bench(
                        req, targets, on_event=held, stop=stop, gates=self.gates, where=self.where
                    )
                await self._joined(req, run, rec)
                self._attach(extras, run)
                self._stamped(run)
                self._append(lambda: history.append(run, self.fleet.history_path))
                return run
            finally:
                held.release()
                self.running = False

    async def run_shape(self, req: ShapeRequest, stop: asyncio.Event | None = None) -> ShapeRun:
        """A load ladder, a soak or agentic sessions; every engine event published. LoadError for a bad
        `load` / `slo` text, BenchRefused when there is nothing to measure."""
        spec = parse_load(req.load)
        slo = parse_slo(req.slo) if req.slo else None
        async with self._lock:
            self.running = True
            held = _HeldFinish(self._publish)  # LoadFinished goes out once the run carries its extras
            try:
                targets = await self.targets(req)
                req = self._with_baseline(req, targets)
                extras = self._extras(req, targets, slo)  # issue 26: flush, scrape, slices
                await extras.flush("run")
                run: ShapeRun
                # issue 26 (W-GPU): the GPUs' samples through a load ladder (--energy is refused for soaks
                # and agentic sessions by the faces)
                rec = None if (req.sessions or req.soak) else self._recorder(req, targets)
                async with extras.scraping():
                    run = await self._shape(req, targets, spec, slo, extras, stop, held)
                if isinstance(run, LoadRun):
                    run.acceptance = summarize(run.results, [t.ref for t in run.targets])
                    if rec is not None:
                        await finish_load(rec, run)
                    elif req.energy:
                        run.energy = url_energy(bool(req.urls))
                self._attach(extras, run)
                self._stamped(run)
                self._append(lambda: history.append_shape(run, self.fleet.history_path))
                return run
            finally:
                held.release()
                self.running = False

    # --- issue 26 (W-GPU): GPU telemetry and energy, per-request acceptance ---------------------------------
    def _recorder(self, req: BenchRequest, targets: Sequence[BenchTarget]) -> GpuRecorder | None:
        """With `energy`, a recorder of the targets' GPUs from the fleet's telemetry, started now."""
        if not req.energy or req.urls or not isinstance(self.fleet, EnergyFleet):
            return None
        rec = GpuRecorder(self.fleet, targets)
        rec.start()
        return rec

    async def _joined(self, req: BenchRequest, run: BenchRun, rec: GpuRecorder | None) -> None:
        """The run with its per-service acceptance and, with `energy`, its GPUs' numbers and energy."""
        run.acceptance = summarize(run.results, [t.ref for t in run.targets])
        if rec is not None:
            await finish(rec, run)
        elif req.energy:
            run.energy = url_energy(bool(req.urls))

    async def _shape(
        self, req: ShapeRequest, targets: list[BenchTarget], spec: LoadSpec, slo: Slo | None,
        extras: RunExtras, stop: asyncio.Event | None, held: _HeldFinish | None = None,
    ) -> ShapeRun:  # fmt: skip
        """The engine of a shape request (agentic sessions, a soak or a load ladder)."""
        if req.sessions:
            if req.api != "generate":
                async with StreamClient() as client:
                    targets = [await with_model(client, t, req.model) for t in targets]
            return await run_agentic(
                req, targets, sessions=req.sessions, turns=req.turns, think_time_s=req.think_time_s,
                dataset=None if req.prompts == "agentic" else req.prompt_set, on_turn=self._publish,
            )  # fmt: skip
        if req.soak:
            soak = SoakSettings(
                duration_s=req.duration_s or 60.0, window_s=req.window_s, slo=slo,
                log_path=Path(req.soak_log) if req.soak_log else None,
                gpu_probe=await self.gpu_probe(targets),
                history_path=self.fleet.history_path,  # the start line and windows as they come
            )  # fmt: skip
            return await run_soak(req, targets, spec, soak, extras.hooks(self._hooks(stop, held)))
        settings = LoadSettings(
            requests=req.requests, duration_s=req.duration_s, slo=slo,
            stop_on_saturation=req.stop_on_saturation, saturation_test=req.saturation_test,
            saturation_alpha=req.saturation_alpha, saturation_window=req.saturation_window,
        )  # fmt: skip
        return await run_load(req, targets, spec, settings, extras.hooks(self._hooks(stop, held), spec))

    # --- issue 26 (w-server): cache reset, server metrics, time slices around every run -----------------------
    def _extras(self, req: BenchRequest, targets: Sequence[BenchTarget], slo: Slo | None = None) -> RunExtras:
        """The run's extras; a fleet service's log is followed for the metrics fallback (a --url server has
        none we can follow)."""
        urls = set(req.urls)

        def logs(ref: str) -> LogLines | None:
            if urls or ref not in req.refs:
                return None
            return lambda: self.fleet.follow_log(ref)

        return RunExtras(req, targets, logs, slo)

    def _attach(self, extras: RunExtras, run: AnyRun) -> None:
        """The slices and the server's figures on the run; a bug there costs them, never the run's record."""
        try:
            extras.attach(run)
        except Exception as e:
            self._word(f"time slices / server metrics not recorded: {type(e).__name__}: {e}")

    async def flush_cache(self, refs: Sequence[str], before: str) -> list[CacheFlush]:
        """Reset the prefix cache of each service (SGLang /flush_cache, vLLM /reset_prefix_cache) through the
        bench's own route to it: for the sweep, before each point. The records say what each server did."""
        targets = await self.bench_targets(refs)
        return await RunExtras(BenchRequest(refs=list(refs), flush_cache=True), targets).flush(before)

    @staticmethod
    def _with_baseline(req: R, targets: Sequence[BenchTarget]) -> R:
        """Deltas against the first service unless the request names a baseline."""
        if req.baseline or not targets:
            return req
        return req.model_copy(update={"baseline": targets[0].ref})

    def _append(self, write: Callable[[], object]) -> None:
        try:
            write()
        except OSError as e:
            self._word(f"bench history not written: {e.strerror or e}")

    async def gpu_probe(self, targets: Sequence[BenchTarget]) -> GpuProbe:
        return await gpu_probe(self.fleet, targets)

    # --- history -------------------------------------------------------------------------------------------
    def history(self) -> list[AnyRun]:
        """The last plain runs (read incrementally) and load / soak / agentic runs, oldest first."""
        path = self.fleet.history_path
        try:
            runs: list[AnyRun] = [*history.load_tail(path), *history.load_shapes(path)]
        except Exception as e:
            self._word(f"bench history unreadable: {e}")
            return []
        return sorted(runs, key=lambda r: r.started_at)[-history.RECENT_RUNS :]


__all__ = ["NOT_RUNNING", "BenchDesk", "BenchFleet", "BenchRefused", "url_targets"]

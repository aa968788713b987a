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
from typing import TypeVar

from ddtree_tui.bench import history
from ddtree_tui.bench.load import parse_load, parse_slo
from ddtree_tui.bench.models import (
    BenchRequest,
    BenchRun,
    BenchTarget,
    PromptStarted,
    ShapeRequest,
    TokensReceived,
)
from ddtree_tui.bench.results import AnyRun, ShapeRun
from ddtree_tui.bench.runextras import RunExtras
from ddtree_tui.bench.runner import Gate, RunHooks, run_bench
from ddtree_tui.bench.soak import GpuProbe
from ddtree_tui.bench.windows import CacheFlush
from ddtree_tui.config import HostProfile
from ddtree_tui.fleet.bench_extras import HeldFinish, attach, extras_for, joined, recorder, run_shape_engine
from ddtree_tui.fleet.bench_targets import BenchFleet, gpu_probe, manifest, url_targets
from ddtree_tui.fleet.identity import FORCE_HINT, changed, forced, served_identity, stamp
from ddtree_tui.model.events import BenchEventWrap, BenchLiveWrap, Notice
from ddtree_tui.model.identity import TargetIdentity

R = TypeVar("R", bound=BenchRequest)
NOT_RUNNING = frozenset({"stopped", "crashed"})  # no server of ours behind the port: never measured


class BenchRefused(RuntimeError):
    """Nothing to measure (every service left out), or a service that cannot be reached; the words say why."""


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
        wrap = BenchLiveWrap if isinstance(ev, PromptStarted | TokensReceived) else BenchEventWrap
        self.fleet.publish(wrap(event=ev))

    def _wants_live(self) -> bool:
        """Whether anyone reads a request in flight's events (a live view): else none are made."""
        return self.fleet.wants(BenchLiveWrap)

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
        previous = {i.ref: i for i in self.recorded_identities()}  # the latest of each
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
        previous = {i.ref: i for i in self.recorded_identities()}  # the latest of each
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
            recheck=self._recheck, wants_live=self._wants_live,
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
            held = HeldFinish(self._publish)  # RunFinished goes out once the run carries its extras
            try:
                targets = await self.targets(req)
                req = self._with_baseline(req, targets)
                rec = recorder(self.fleet, req, targets)  # issue 26: the GPUs' samples through the run
                extras = extras_for(self.fleet, req, targets)  # issue 26: flush, scrape, slices
                await extras.flush("run")
                async with extras.scraping():
                    run = await run_bench(
                        req, targets, on_event=held, stop=stop, gates=self.gates, where=self.where,
                        wants_live=self._wants_live,
                    )  # fmt: skip
                await joined(req, run, rec)
                attach(extras, run, self._word)
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
            held = HeldFinish(self._publish)  # LoadFinished goes out once the run carries its extras
            try:
                targets = await self.targets(req)
                req = self._with_baseline(req, targets)
                extras = extras_for(self.fleet, req, targets, slo)  # issue 26: flush, scrape, slices
                await extras.flush("run")
                run: ShapeRun
                # issue 26: the GPUs' samples through a load ladder (the faces refuse --energy for the others)
                rec = None if (req.sessions or req.soak) else recorder(self.fleet, req, targets)
                async with extras.scraping():
                    run = await run_shape_engine(
                        req, targets, spec, slo, extras, self._hooks(stop, held), self._publish,
                        lambda: self.gpu_probe(targets), self.fleet.history_path,
                    )  # fmt: skip
                await joined(req, run, rec)
                attach(extras, run, self._word)
                self._stamped(run)
                self._append(lambda: history.append_shape(run, self.fleet.history_path))
                return run
            finally:
                held.release()
                self.running = False

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
    def recorded_identities(self) -> list[TargetIdentity]:
        """The target identities the recent runs of the history recorded, oldest first (read apart from the
        runs themselves: a run's start parses no earlier run's results)."""
        try:
            return history.recent_identities(self.fleet.history_path)
        except Exception as e:
            self._word(f"bench history unreadable: {e}")
            return []

    def history(self) -> list[AnyRun]:
        """The last plain runs (read incrementally) and load / soak / agentic runs, oldest first."""
        try:
            return history.recent_runs(self.fleet.history_path)
        except Exception as e:
            self._word(f"bench history unreadable: {e}")
            return []


__all__ = ["NOT_RUNNING", "BenchDesk", "BenchFleet", "BenchRefused", "url_targets"]

"""Launch, kill, restart and move services on one host, and keep their status current.

One ServiceManager a host. Everything reaches the host through its Transport: short host programs
(`ddtree_tui/remote/`) run with the host's Python for launch and kill; one long-lived watcher stream reports
every service's process state each interval; one `tail -F` stream a service follows its log; HTTP probes go
through the transport's port forward on one aiohttp session, every body under a cap. Nothing here kills a
process we did not start: the host-side kill checks the pid's start time and command line against our
pidfile first.

ServiceManager is the door and owns its parts, each with its own narrow inputs (issue 24): the store
(`svcstate.ServiceBook`), publishing (`publish`), redaction, holds, host programs (`hostcall`), the watcher
(`watching`), the prober (`probing`), the log follower (`logfollow`), `launching` and `killing`. The status
rules are `status.derive_status`, the host replies `replies`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.lib.tasks import cancel_and_wait
from ddtree_tui.model.identity import TargetIdentity
from ddtree_tui.model.snapshot import ActionResult, ServiceStatus
from ddtree_tui.services.holds import Holds
from ddtree_tui.services.hostcall import HostCalls
from ddtree_tui.services.identity import check_listener
from ddtree_tui.services.killing import Killer
from ddtree_tui.services.launching import Launcher
from ddtree_tui.services.logfollow import LogFollower
from ddtree_tui.services.logs import LogMetrics
from ddtree_tui.services.probing import Prober
from ddtree_tui.services.publish import Listeners, Publisher
from ddtree_tui.services.redaction import Redactor
from ddtree_tui.services.svcstate import ServiceBook, ServiceHeld, SvcState
from ddtree_tui.services.watching import Watcher
from ddtree_tui.transport.base import Transport

__all__ = ["ActionResult", "LogMetrics", "ServiceHeld", "ServiceManager", "move_service"]


class ServiceManager:
    """Watches and acts on every service of one host profile."""

    def __init__(
        self,
        transport: Transport,
        profile: HostProfile,
        *,
        on_status: Callable[[ServiceStatus], None] | None = None,
        on_log: Callable[[str, str], None] | None = None,
        on_metrics: Callable[[str, LogMetrics], None] | None = None,
        probe_interval: float = 2.0,
        health_timeout: float = 5.0,
        fail_threshold: int = 2,
        follow_lines: int = 40,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.transport = transport
        self.probe_interval, self.health_timeout = probe_interval, health_timeout
        self.fail_threshold, self.follow_lines = fail_threshold, follow_lines
        self._started = False
        self._passes = 0  # status passes under way (refresh), so the last one closes the probe session
        book = self._book = ServiceBook(profile, clock)
        self._listeners = Listeners(on_status, on_log, on_metrics)
        redactor = Redactor(book)
        pub = self._pub = Publisher(self._listeners, fail_threshold, redactor.text)
        calls = self._calls = HostCalls(transport, book)
        self._holds = Holds(book)
        self._watcher = Watcher(calls, book, pub, redactor, probe_interval)
        self._prober = Prober(transport, book, pub, probe_interval, health_timeout)
        self._logs = LogFollower(
            calls, book, pub, redactor, self._listeners, interval=probe_interval, follow_lines=follow_lines
        )
        self._launcher = Launcher(
            calls, book, self._holds, pub, redactor,
            apply=self._watcher.apply, added=self._added, settle=self._refresh_if_idle,
        )  # fmt: skip
        self._killer = Killer(
            calls, book, self._holds, apply=self._watcher.apply, settle=self._refresh_if_idle
        )

    # --- who hears about it (settable after construction) ----------------------------------------------------
    @property
    def profile(self) -> HostProfile:
        """The host profile as it is now (a launch with a new spec adds that service)."""
        return self._book.profile

    @property
    def on_status(self) -> Callable[[ServiceStatus], None] | None:
        return self._listeners.on_status

    @on_status.setter
    def on_status(self, cb: Callable[[ServiceStatus], None] | None) -> None:
        self._listeners.on_status = cb

    @property
    def on_log(self) -> Callable[[str, str], None] | None:
        return self._listeners.on_log

    @on_log.setter
    def on_log(self, cb: Callable[[str, str], None] | None) -> None:
        self._listeners.on_log = cb

    @property
    def on_metrics(self) -> Callable[[str, LogMetrics], None] | None:
        return self._listeners.on_metrics

    @on_metrics.setter
    def on_metrics(self, cb: Callable[[str, LogMetrics], None] | None) -> None:
        self._listeners.on_metrics = cb

    # --- holds (a sweep owns the service while it runs) ------------------------------------------------------
    def hold(self, name: str, owner: str) -> None:
        """Reserve `name` for `owner`; ServiceHeld when someone else holds it."""
        self._holds.hold(name, owner)

    def release(self, name: str, owner: str) -> None:
        self._holds.release(name, owner)

    def held_by(self, name: str) -> str | None:
        return self._holds.held_by(name)

    # --- what is known ---------------------------------------------------------------------------------------
    def _svc(self, name: str) -> SvcState:
        """The service's record (KeyError when the host has none). Kept for Fleet.move's one-off
        startup_timeout; `move_service(..., startup_timeout=)` does that without touching the record."""
        return self._book.get(name)

    def spec(self, name: str) -> ServiceSpec:
        return self._book.get(name).spec

    def statuses(self) -> list[ServiceStatus]:
        return self._book.statuses()

    def status(self, name: str) -> ServiceStatus:
        return self._book.get(name).status

    def service_pids(self) -> dict[int, str]:
        """pid -> service name for every process of our running services (the launcher and its children), and
        for the workers a dead main process left behind (they still hold its GPU memory)."""
        return self._book.service_pids()

    async def base_url(self, name: str) -> str:
        """http://127.0.0.1:<local port> reaching the service's port on its host."""
        return await self._prober.base_url(name)

    async def identity(self, name: str, ref: str) -> TargetIdentity:
        """Who holds the service's port now: our launched process group, or something else (issue 29)."""
        return await check_listener(self._calls, self._book.get(name), ref)

    # --- keeping the statuses current ------------------------------------------------------------------------
    async def refresh(self) -> None:
        """One status pass now (process states, then a health probe of the live ones). Passes may overlap
        (two services waited for at once share this manager): the probe session is closed only when the last
        pass ends, never under another pass's request ("Session is closed")."""
        self._passes += 1
        try:
            if await self._watcher.refresh():
                await self._prober.probe_live()
        finally:
            self._passes -= 1
            if not self._started and not self._passes:  # nothing probes until the next pass: close it
                await self._prober.close()

    async def _refresh_if_idle(self) -> None:
        if not self._started:
            await self.refresh()

    async def start(self) -> None:
        """Watch every service: one watcher stream, a log follower and a health prober a service."""
        if self._started:
            return
        self._started = True
        self._watcher.start()
        for svc in self._book:
            self._logs.start(svc)
            self._prober.start(svc)

    async def _added(self, svc: SvcState) -> None:
        """A launch added `svc`: watch it like the others."""
        if self._started:
            self._logs.start(svc)
            self._prober.start(svc)
            await self._watcher.restart()

    async def stop(self) -> None:
        """Stop watching; services keep running."""
        tasks = [*self._watcher.take_tasks(), *self._logs.take_tasks(), *self._prober.take_tasks()]
        await cancel_and_wait(tasks)
        self._started = False
        await self._prober.close()

    async def wait_state(self, name: str, states: set[str], timeout: float) -> ServiceStatus:
        """Wait until the service is in one of `states`; returns its status then, or the current status when
        the timeout passes first (check `.state`). Polls by itself when start() was not called."""
        svc = self._book.get(name)
        deadline = time.monotonic() + timeout
        while True:
            if svc.status.state in states:
                return svc.status
            left = deadline - time.monotonic()
            if left <= 0:
                return svc.status
            if self._started:
                ev = self._pub.changed
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await ev.wait()
            else:
                await self.refresh()
                if svc.status.state in states:
                    return svc.status
                await asyncio.sleep(min(self.probe_interval, max(0.0, deadline - time.monotonic())))

    # --- logs ------------------------------------------------------------------------------------------------
    async def read_log(self, name: str, lines: int = 40) -> list[str]:
        """The last lines of a service's log (empty when it has none yet)."""
        return await self._logs.read_log(name, lines)

    def follow_log(
        self, name: str, on_gap: Callable[[str], None] | None = None, retry_s: float = 1.0
    ) -> AsyncIterator[str]:
        """New lines of a service's log as they come (see LogFollower.follow_log)."""
        return self._logs.follow_log(name, on_gap, retry_s)

    # --- actions ---------------------------------------------------------------------------------------------
    async def launch(
        self, name: str, spec: ServiceSpec | None = None, *, force: bool = False, holder: str | None = None
    ) -> ActionResult:
        """Start the service detached on the host; refused when it already runs, its port is taken, the
        host's own SGLang parser rejects the command line (`force` launches anyway), or someone other than
        `holder` holds it (a sweep)."""
        return await self._launcher.launch(name, spec, force=force, holder=holder)

    async def kill(
        self, name: str, timeout: float | None = None, *, holder: str | None = None
    ) -> ActionResult:
        """SIGTERM the service's process group, SIGKILL after the timeout; only if the pid is still ours."""
        return await self._killer.kill(name, timeout, holder=holder)

    async def restart(self, name: str, *, force: bool = False, holder: str | None = None) -> ActionResult:
        """Kill (if running) then launch with the same spec."""
        k = await self.kill(name, holder=holder)
        if not k.ok:
            return k
        r = await self.launch(name, force=force, holder=holder)
        if r.ok:
            return r.model_copy(update={"message": f"{k.message}; {r.message}"})
        return r


async def move_service(
    src: ServiceManager, dst: ServiceManager, name: str, *, startup_timeout: float | None = None
) -> ActionResult:
    """Launch src's spec of `name` on dst (added there if absent), wait until ready (`startup_timeout`, for
    this move only; default the spec's), then kill it on src.

    The answer to a host that lost its GPU: the old one is killed only once the new one serves, and a
    source host that cannot be reached does not block the move (the result says so). `startup_timeout`:
    how long to wait for ready this time (default: the spec's); src's spec is left as it is.
    """
    spec = src.spec(name)
    held = src._holds.refusal(name, "move", None)
    if held is not None:
        return held
    own = dst._book.find(name)
    if own is not None and own.spec != spec:  # launch would overwrite dst's own service of that name
        return ActionResult(
            ok=False,
            status=own.status,
            message=f"{dst.profile.name} already has a different service named '{name}' "
            f"(port {own.spec.port}); nothing was launched",
            suggestion="rename one of them in its profile, or move to another host",
        )
    if startup_timeout is not None:  # for this move only: dst's watcher waits as long as the move does
        spec = spec.model_copy(update={"startup_timeout": float(startup_timeout)})
    r = await dst.launch(name, spec)
    if not r.ok:
        return r
    wait = spec.startup_timeout
    st = await dst.wait_state(name, {"ready", "crashed", "unhealthy"}, wait)
    if st.state != "ready":
        return ActionResult(
            ok=False,
            status=st,
            message=f"{dst.profile.name}/{name} did not become ready ({st.state}: {st.detail}); "
            f"{src.profile.name}/{name} left as it was",
        )
    k = await src.kill(name)
    msg = f"moved {name} from {src.profile.name} to {dst.profile.name} (pid {st.pid}); {k.message}"
    sugg = None if k.ok else f"the old one on {src.profile.name} was not stopped: {k.suggestion or k.message}"
    return ActionResult(ok=True, message=msg, status=st, suggestion=sugg)

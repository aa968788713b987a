"""Launch, kill, restart and move services on one host, and keep their status current.

One ServiceManager a host. Everything reaches the host through its Transport: short host programs
(`ddtree_tui/remote/`) run with the host's Python for launch and kill; one long-lived watcher stream reports
every service's process state each interval; one `tail -F` stream a service follows its log; HTTP probes go
through the transport's port forward with one kept-alive httpx client. Nothing here kills a process we did
not start: the host-side kill checks the pid's start time and command line against our pidfile first.

The manager is assembled from its parts: `svcstate` (bookkeeping), `watching` (watcher, health, logs),
`launching`, `killing`; the status rules are `status.derive_status`, the host replies `replies`.
"""

from __future__ import annotations

from collections.abc import Callable

from ddtree_tui.config import HostProfile
from ddtree_tui.model.snapshot import ActionResult, ServiceStatus
from ddtree_tui.services.killing import Killing
from ddtree_tui.services.launching import Launching
from ddtree_tui.services.logs import LogMetrics
from ddtree_tui.services.svcstate import ManagerOptions, ServiceHeld
from ddtree_tui.transport.base import Transport

__all__ = ["ActionResult", "LogMetrics", "ServiceHeld", "ServiceManager", "move_service"]


class ServiceManager(Launching, Killing):
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
    ) -> None:
        opts = ManagerOptions(
            on_status, on_log, on_metrics, probe_interval, health_timeout, fail_threshold, follow_lines
        )
        super().__init__(transport, profile, opts)

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
    source host that cannot be reached does not block the move (the result says so).
    """
    spec = src.spec(name)
    if startup_timeout is not None:
        spec = spec.model_copy(update={"startup_timeout": float(startup_timeout)})
    held = src._held(name, "move", None)
    if held is not None:
        return held
    own = dst._svcs.get(name)
    if own is not None and own.spec != spec:  # launch would overwrite dst's own service of that name
        return ActionResult(
            ok=False,
            status=own.status,
            message=f"{dst.profile.name} already has a different service named '{name}' "
            f"(port {own.spec.port}); nothing was launched",
            suggestion="rename one of them in its profile, or move to another host",
        )
    r = await dst.launch(name, spec)
    if not r.ok:
        return r
    st = await dst.wait_state(name, {"ready", "crashed", "unhealthy"}, spec.startup_timeout)
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

"""Launching a service: preflight (the host's own SGLang parser), then remote/launch.py under the host lock.

The host program checks the workdir, takes the launch lock, refuses a service that runs (or is degraded) and
a port that is taken, then starts the wrapper detached; every refusal comes back as an ActionResult that says
what to do about it. A launch with a spec the host does not have yet adds the service (the manager then
watches it too).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from ddtree_tui.config import ServiceSpec
from ddtree_tui.model.snapshot import ActionResult
from ddtree_tui.services import argcheck, hostscripts
from ddtree_tui.services.holds import Holds
from ddtree_tui.services.hostcall import HostCalls
from ddtree_tui.services.launchline import build_launch, service_paths
from ddtree_tui.services.publish import Publisher
from ddtree_tui.services.redaction import Redactor
from ddtree_tui.services.replies import LaunchReply, WatchRecord
from ddtree_tui.services.status import exit_words
from ddtree_tui.services.svcstate import ServiceBook, SvcState
from ddtree_tui.transport.base import TransportError

__all__ = ["Launcher"]


class Launcher:
    """Launches the book's services on their host."""

    def __init__(
        self,
        calls: HostCalls,
        book: ServiceBook,
        holds: Holds,
        pub: Publisher,
        redactor: Redactor,
        *,
        apply: Callable[[str, WatchRecord], None],
        added: Callable[[SvcState], Awaitable[None]],
        settle: Callable[[], Awaitable[None]],
    ) -> None:
        """`apply`: take in a process record; `added`: watch a service launch just added; `settle`: one
        status pass when nothing else keeps the statuses current."""
        self._calls = calls
        self._book = book
        self._holds = holds
        self._pub = pub
        self._redactor = redactor
        self._apply = apply
        self._added = added
        self._settle = settle

    async def launch(
        self, name: str, spec: ServiceSpec | None = None, *, force: bool = False, holder: str | None = None
    ) -> ActionResult:
        """Start the service detached on the host; refused when it already runs, its port is taken, the
        host's own SGLang parser rejects the command line (`force` launches anyway), or someone other than
        `holder` holds it (a sweep)."""
        held = self._holds.refusal(name, "launch", holder) if name in self._book else None
        if held is not None:
            return held
        if spec is not None:
            added = self._book.adopt(name, spec)
            if added is not None:
                await self._added(added)
        svc = self._book.get(name)
        spec = svc.spec
        profile, transport = self._book.profile, self._calls.transport
        if spec.launcher == "external":
            return ActionResult(
                ok=False,
                message=f"{profile.name}/{name} is external: ddtree-tui did not start it and does not launch it",
                status=svc.status,
            )
        cmd = build_launch(profile, spec)
        check = await argcheck.preflight(transport, profile, spec, cmd)
        if check is not None and check.ok is False and not force:
            msg, sugg = argcheck.refusal(f"{profile.name}/{name}", check)
            return ActionResult(ok=False, message=msg, status=svc.status, suggestion=sugg)
        payload = {
            **self._calls.files(svc),
            "argv": cmd.argv,
            "display_argv": cmd.display_argv(),
            "env": cmd.env,
            "cwd": cmd.cwd,
            "log": cmd.log_path,
            "pidfile": cmd.pidfile_path,
            "exitfile": cmd.exitfile_path,
            "lockfile": service_paths(profile, name)["lockfile"],
            "port": spec.port,
            "bind": spec.bind,
            "name": name,
            "wrapper": hostscripts.WRAPPER,
            "avoid_ports": [s.spec.port for s in self._book],
        }
        host = profile.name
        try:
            r = await self._calls.run(hostscripts.LAUNCH, payload, 40, LaunchReply)
        except TransportError as e:
            return ActionResult(
                ok=False,
                message=f"cannot launch {host}/{name}: {e}",
                status=svc.status,
                suggestion="check the host connection (ddtree-tui doctor)",
            )
        if not r.ok:
            return await self._refused(svc, r)
        rec = r.record
        pid = rec.pid if rec is not None else None
        svc.launched_hashes.add(cmd.argv_hash())
        svc.lines.clear()
        svc.metrics = None
        svc.ever_ready_pid = None
        svc.killing = False
        self._apply(
            name,
            WatchRecord(
                present=True,
                alive=True,
                pid=pid,
                pgid=rec.pgid if rec is not None else None,
                started_at=rec.started_at if rec is not None else None,
                pids=[pid] if pid is not None else [],
            ),
        )
        self._pub.set(svc, last_log=[], accept_length=None, accept_rate=None, gen_throughput=None)
        msg = f"launched {host}/{name} (pid {pid}, port {spec.port})"
        if check is not None and check.ok is False:
            msg += f"; forced past the check: {'; '.join(check.problems)}"
        elif check is not None and check.ok is None:
            msg += f"; {check.summary()}"
        if r.stale is not None:
            msg += f"; removed a stale pidfile (pid {r.stale.pid}: {r.stale.why})"
        return ActionResult(ok=True, message=msg, status=svc.status)

    async def _refused(self, svc: SvcState, r: LaunchReply) -> ActionResult:
        """The ActionResult for a launch the host program refused (or that did not start)."""
        host, name, spec = self._book.host, svc.spec.name, svc.spec
        where = self._book.profile.source or "the profile"

        def no(message: str, suggestion: str | None) -> ActionResult:
            return ActionResult(ok=False, message=message, status=svc.status, suggestion=suggestion)

        reason = r.reason
        if reason == "workdir":
            return no(
                f"refused to launch {host}/{name}: {r.why}",
                f"fix the workdir on {host}, or set another workdir in {where}",
            )
        if reason == "busy":
            return no(
                f"another launch of {host}/{name} is still in progress on {host}; nothing was started",
                "wait for it, then look at the status",
            )
        if reason == "degraded":
            pids = ", ".join(str(x) for x in r.pids)
            await self._settle()
            return no(
                f"{host}/{name} is degraded: its main process {r.pid} exited but its "
                f"processes {pids} still run; nothing was launched",
                f"kill {host}/{name} first (it ends them), then launch",
            )
        if reason == "space":
            return no(f"refused to launch {host}/{name}: {r.why}", "free some space on that disk")
        if reason == "running":
            when = time.strftime(" since %H:%M:%S", time.localtime(r.started_at)) if r.started_at else ""
            await self._settle()
            return no(f"{host}/{name} is already running (pid {r.pid}{when})", "restart it, or kill it first")
        if reason == "port":
            owner = r.holder  # the port's owner (not the sweep holder of this launch)
            if owner is not None and owner.pid:
                who = f"pid {owner.pid} ({owner.cmd or '?'})"
            elif owner is not None:
                who = "a process of another user (not visible)"
            else:
                who = "another socket"
            nxt = r.next_free
            sugg = f"set port = {nxt} for {name} in {where}" if nxt else None
            return no(f"port {spec.port} on {host} is already in use by {who}", sugg)
        tail = self._redactor.lines(r.tail)
        if reason == "exec":
            msg = f"{host}/{name} did not start: {exit_words(r.exit)}"
        else:
            msg = f"{host}/{name}: the launcher did not report a pid within 15 s"
        self._pub.set(svc, last_log=list(tail))
        return no(msg, tail[-1] if tail else None)

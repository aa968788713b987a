"""Killing a service: remote/kill.py signals its process group, and only a pid that is still ours.

The host program believes the pidfile only in a trusted workdir and only for a process whose start time,
uid and command line match what we launched; a dead main process's workers (its group) are ended too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ddtree_tui.model.snapshot import ActionResult
from ddtree_tui.services import hostscripts
from ddtree_tui.services.holds import Holds
from ddtree_tui.services.hostcall import HostCalls
from ddtree_tui.services.replies import KillReply, WatchRecord
from ddtree_tui.services.status import exit_words
from ddtree_tui.services.svcstate import ServiceBook, SvcState
from ddtree_tui.transport.base import TransportError

_GONE = (
    "terminated",
    "killed",
    "not-running",
    "stale",
    "group-ended",
)  # results after which no pidfile is left


def _processes(n: int) -> str:
    return f"{n} process{'es' if n != 1 else ''}"


class Killer:
    """Stops the book's services on their host."""

    def __init__(
        self,
        calls: HostCalls,
        book: ServiceBook,
        holds: Holds,
        *,
        apply: Callable[[str, WatchRecord], None],
        settle: Callable[[], Awaitable[None]],
    ) -> None:
        """`apply`: take in a process record; `settle`: one status pass when nothing else keeps the
        statuses current."""
        self._calls = calls
        self._book = book
        self._holds = holds
        self._apply = apply
        self._settle = settle

    async def kill(
        self, name: str, timeout: float | None = None, *, holder: str | None = None
    ) -> ActionResult:
        """SIGTERM the service's process group, SIGKILL after the timeout; only if the pid is still ours."""
        svc = self._book.get(name)
        held = self._holds.refusal(name, "kill", holder)
        if held is not None:
            return held
        if svc.spec.launcher == "external":
            return ActionResult(
                ok=False,
                message=f"{self._book.host}/{name} is external: ddtree-tui did not start it and does not stop it",
                status=svc.status,
            )
        t = float(timeout if timeout is not None else svc.spec.kill_timeout)
        svc.killing = True
        try:
            r = await self._calls.run(
                hostscripts.KILL, {**self._calls.files(svc), "timeout": t}, t + 30, KillReply
            )
        except TransportError as e:
            svc.killing = False
            return ActionResult(
                ok=False,
                message=f"cannot kill {self._book.host}/{name}: {e}",
                status=svc.status,
                suggestion="check the host connection",
            )
        if r.result in _GONE:
            self._apply(name, WatchRecord(present=False))
        svc.killing = False
        await self._settle()
        return self._kill_result(svc, r, t)

    def _kill_result(self, svc: SvcState, r: KillReply, t: float) -> ActionResult:
        """What the kill did, in words."""
        host, name, pid, ended = self._book.host, svc.spec.name, r.pid, r.ended

        def res(ok: bool, message: str, suggestion: str | None = None) -> ActionResult:
            return ActionResult(ok=ok, message=message, status=svc.status, suggestion=suggestion)

        others = ""
        if ended and r.result in ("terminated", "killed"):
            others = f" and {len(ended)} other process{'es' if len(ended) != 1 else ''} of its group"
        if r.result == "untrusted":
            return res(
                False,
                f"refused to signal anything for {host}/{name}: {r.why}",
                f"fix the workdir on {host}; its pidfile cannot be believed until then",
            )
        if r.result == "terminated":
            return res(True, f"stopped {host}/{name} (pid {pid}{others}, SIGTERM, {r.waited} s)")
        if r.result == "killed":
            return res(
                True,
                f"killed {host}/{name} (pid {pid}{others}): it ignored SIGTERM for {t:.0f} s, sent SIGKILL",
            )
        if r.result == "group-ended":
            how = "SIGTERM" if r.how == "terminated" else "SIGKILL after SIGTERM"
            pids = ", ".join(str(x) for x in ended)
            return res(
                True,
                f"{host}/{name}: main pid {pid} had already {exit_words(r.exit)}; ended "
                f"{_processes(len(ended))} of its group still running (pids {pids}, {how})",
            )
        if r.result == "not-running":
            return res(True, f"{host}/{name} is not running")
        if r.result == "stale":
            return res(
                True, f"{host}/{name} was not running ({exit_words(r.exit)}); removed its stale pidfile"
            )
        if r.result in ("pid-reused", "foreign"):
            what = (
                "was reused by another process"
                if r.result == "pid-reused"
                else "runs a command we did not start"
            )
            self._apply(name, WatchRecord(present=False))
            return res(
                False,
                f"refused to signal pid {pid} on {host}: it {what} ({r.cmd or '?'}); "
                "our service is gone, its stale pidfile was removed",
                "check the host's processes yourself; nothing was signalled",
            )
        return res(
            False,
            f"{host}/{name} (pid {pid}) survived SIGKILL",
            "the process may be stuck in the kernel (D state); check the host",
        )

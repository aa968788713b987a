"""Headless `ddtree-tui launch|kill|restart|move|logs HOST/SVC`: act through Fleet, wait for the result,
exit 0 / 1 / 2.

The result line goes to stdout, progress and hints to stderr, so a script can capture the one and a person
still sees the other.
"""

from __future__ import annotations

import asyncio
import sys

from ddtree_tui.cli.args import ServiceArgs
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, UsageError, handler, service_of
from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.fleet import Fleet, TransportError, launch_line
from ddtree_tui.model.intents import Kill, Launch, Move, Outcome, Restart, ServiceIntent
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.model.snapshot import ServiceStatus

WAIT_FOR = {"ready", "crashed", "unhealthy", "stopped"}


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _report(r: Outcome) -> None:
    print(r.message, flush=True)
    if r.suggestion:
        _err(f"hint: {r.suggestion}")


def _describe(st: ServiceStatus) -> str:
    """`HOST/SVC: state (pid N): detail`, the pid and detail only where known."""
    pid = f" (pid {st.pid})" if st.pid else ""
    detail = f": {st.detail}" if st.detail else ""
    return f"{st.host}/{st.name}: {st.state}{pid}{detail}"


async def _wait_ready(fleet: Fleet, ref: ServiceRef, timeout: float) -> int:
    st = await fleet.wait_service(ref, WAIT_FOR, timeout)
    print(_describe(st), flush=True)
    if st.state == "ready":
        return EXIT_OK
    if st.state == "crashed" and st.last_log:
        _err("last log lines:\n  " + "\n  ".join(st.last_log))
    if st.state == "starting":
        _err(f"hint: not ready after {timeout:.0f} s; see `ddtree-tui logs {st.host}/{st.name}`")
    return EXIT_FAIL


async def _act(args: ServiceArgs, fleet: Fleet, host: HostProfile, spec: ServiceSpec) -> int:
    ref = ServiceRef(host.name, spec.name)
    if args.mode == "logs":
        for line in await fleet.logs(ref, max(0, args.lines)):
            print(line, flush=True)
        if args.follow:
            async for line in fleet.follow_log(ref, on_gap=_err):
                print(line, flush=True)
        return EXIT_OK
    who = fleet.held_elsewhere(ref)
    if who is not None:
        _err(f"refused to {args.mode} {ref}: it is held by {who}; nothing was done")
        return EXIT_FAIL
    timeout: float | None = args.timeout
    force = args.force
    intent: ServiceIntent
    if args.mode == "kill":
        intent = Kill(ref=ref, timeout=timeout)
    elif args.mode == "move":
        intent = Move(ref=ref, to_host=args.to_host or "", startup_timeout=timeout)
    elif args.mode == "launch":
        _err(f"launching {ref}: {launch_line(host, spec)}")
        intent = Launch(ref=ref, force=force)
    else:
        intent = Restart(ref=ref, force=force)
    r = await fleet.do(intent)
    _report(r)
    if not r.ok or args.mode in ("kill", "move"):
        return EXIT_OK if r.ok else EXIT_FAIL
    return await _wait_ready(fleet, ref, timeout if timeout is not None else spec.startup_timeout)


async def _run(args: ServiceArgs, profiles: list[HostProfile], host: HostProfile, spec: ServiceSpec) -> int:
    used = [host] + [
        p for p in profiles if args.mode == "move" and p.name == args.to_host and p.name != host.name
    ]
    async with Fleet.open(
        used, telemetry=False, auto_complete_todos=False, probe_interval=0.5, watch=False
    ) as fleet:
        try:
            for p in used:
                why = await fleet.reach(p.name)
                if why is not None:
                    _err(why)
                    return EXIT_FAIL
            return await _act(args, fleet, host, spec)
        except TransportError as e:
            _err(str(e))
            return EXIT_FAIL


@handler(None, ServiceArgs)
def cli_main(args: ServiceArgs) -> int:
    """launch / kill / restart / move / logs for one HOST/SVC."""
    profiles, host, spec = service_of(args, args.service)
    if args.mode in ("launch", "restart") and args.dry_run:
        print(launch_line(host, spec), flush=True)
        return EXIT_OK
    timeout = args.timeout
    if args.mode in ("kill", "move") and timeout is not None and timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    if args.mode == "move" and not any(p.name == args.to_host for p in profiles):
        raise UsageError(f"no host '{args.to_host}' (known: {', '.join(p.name for p in profiles)})")
    return asyncio.run(_run(args, profiles, host, spec))

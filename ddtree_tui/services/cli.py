"""Headless `ddtree-tui launch|kill|restart|move|logs HOST/SVC`: act, wait for the result, exit 0 / 1 / 2.

The result line goes to stdout, progress and hints to stderr, so a script can capture the one and a person
still sees the other.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ddtree_tui.config import HostProfile, ProfileError, find_service, resolve_profiles
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.services.lifecycle import ActionResult, ServiceManager, move_service
from ddtree_tui.state import ServiceStatus
from ddtree_tui.transport import Transport, TransportError, make_transport

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _report(r: ActionResult) -> None:
    print(r.message, flush=True)
    if r.suggestion:
        _err(f"hint: {r.suggestion}")


def _describe(st: ServiceStatus) -> str:
    words = f"{st.host}/{st.name}: {st.state}"
    if st.pid:
        words += f" (pid {st.pid})"
    if st.detail:
        words += f": {st.detail}"
    return words


async def _connect(profile: HostProfile) -> Transport:
    t = make_transport(profile)
    await t.start()
    if not await t.wait_connected(profile.connect_timeout + 2):
        err = t.status.error or "not connected"
        await t.close()
        raise TransportError(f"cannot reach {profile.name} ({profile.address}): {err}")
    return t


async def _wait_ready(mgr: ServiceManager, name: str, timeout: float) -> int:
    st = await mgr.wait_state(name, {"ready", "crashed", "unhealthy", "stopped"}, timeout)
    print(_describe(st), flush=True)
    if st.state == "ready":
        return EXIT_OK
    if st.state == "crashed" and st.last_log:
        _err("last log lines:\n  " + "\n  ".join(st.last_log))
    if st.state == "starting":
        _err(f"hint: not ready after {timeout:.0f} s; see `ddtree-tui logs {st.host}/{st.name}`")
    return EXIT_FAIL


async def _run(ns: argparse.Namespace, profiles: list[HostProfile], host: HostProfile, svc: str) -> int:
    spec = host.get_service(svc)
    assert spec is not None
    dst_profile: HostProfile | None = None
    if ns.mode == "move":
        dst_profile = next((h for h in profiles if h.name == ns.to_host), None)
        if dst_profile is None:
            _err(f"no host '{ns.to_host}' (known: {', '.join(h.name for h in profiles)})")
            return EXIT_USAGE
    transports: list[Transport] = []
    managers: list[ServiceManager] = []
    try:
        try:
            t = await _connect(host)
            transports.append(t)
            if dst_profile is not None:
                transports.append(await _connect(dst_profile))
        except TransportError as e:
            _err(str(e))
            return EXIT_FAIL
        mgr = ServiceManager(transports[0], host, probe_interval=0.5)
        managers.append(mgr)
        timeout = ns.timeout
        if ns.mode in ("launch", "kill", "restart", "move"):
            from ddtree_tui.sweep import hold

            who = hold.holder(f"{host.name}/{svc}")
            if who is not None:
                _err(f"refused to {ns.mode} {host.name}/{svc}: it is held by {who}; nothing was done")
                return EXIT_FAIL
        if ns.mode == "logs":
            for line in await mgr.read_log(svc, max(0, ns.lines)):
                print(line, flush=True)
            if ns.follow:
                async for line in mgr.follow_log(svc, on_gap=_err):
                    print(line, flush=True)
            return EXIT_OK
        if ns.mode == "launch":
            _err(f"launching {host.name}/{svc}: {build_launch(host, spec).display()}")
            r = await mgr.launch(svc, force=getattr(ns, "force", False))
            _report(r)
            if not r.ok:
                return EXIT_FAIL
            return await _wait_ready(mgr, svc, timeout if timeout is not None else spec.startup_timeout)
        if ns.mode == "kill":
            r = await mgr.kill(svc, timeout=timeout)
            _report(r)
            return EXIT_OK if r.ok else EXIT_FAIL
        if ns.mode == "restart":
            r = await mgr.restart(svc, force=getattr(ns, "force", False))
            _report(r)
            if not r.ok:
                return EXIT_FAIL
            return await _wait_ready(mgr, svc, timeout if timeout is not None else spec.startup_timeout)
        if ns.mode == "move":
            assert dst_profile is not None
            dst = ServiceManager(transports[1], dst_profile, probe_interval=0.5)
            managers.append(dst)
            if timeout is not None:
                spec2 = spec.model_copy(update={"startup_timeout": float(timeout)})
                mgr._svc(svc).spec = spec2
            r = await move_service(mgr, dst, svc)
            _report(r)
            return EXIT_OK if r.ok else EXIT_FAIL
        _err(f"unknown mode {ns.mode!r}")
        return EXIT_USAGE
    except TransportError as e:
        _err(str(e))
        return EXIT_FAIL
    finally:
        for m in managers:
            await m.stop()
        for t in transports:
            await t.close()


def cli_main(ns: argparse.Namespace) -> int:
    """launch / kill / restart / move / logs for one HOST/SVC."""
    try:
        profiles = resolve_profiles(ns.profile, ns.profiles, getattr(ns, "demo", False))
    except ProfileError as e:
        _err(str(e))
        return EXIT_USAGE
    try:
        host, spec = find_service(profiles, ns.service)
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    if ns.mode in ("launch", "restart") and getattr(ns, "dry_run", False):
        print(build_launch(host, spec).display(), flush=True)
        return EXIT_OK
    return asyncio.run(_run(ns, profiles, host, spec.name))

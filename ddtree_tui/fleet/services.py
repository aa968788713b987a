"""The fleet's service desk: launch, kill, restart, move (refused while another holds the service), holds,
the lab's one-off deploys, preflight, logs, patches, doctor, smoke. Each hands the work to the host's
ServiceManager (or its package), publishes the result as a Notice and remembers what it launched (for cleanup)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

from ddtree_tui.bench.smoke import SmokeResult, failed, smoke_request
from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.fleet.hosts import Hosts
from ddtree_tui.fleet.identity import FORCE_HINT, forced, served_identity
from ddtree_tui.model.events import FleetEvent, Notice, PlannedVerb, ServicePlanned
from ddtree_tui.model.identity import TargetIdentity
from ddtree_tui.model.ref import RefLike, ServiceRef
from ddtree_tui.model.snapshot import ActionResult, ServiceStatus
from ddtree_tui.services import holdfiles as holds  # cheap: its launch-code and psutil imports are lazy

if TYPE_CHECKING:  # the doctor, the parser preflight and the patches: imported where asked for, not by every
    # process that opens a fleet (the doctor's checks alone were ~0.3 s of each headless start, issue 24)
    from ddtree_tui.doctor import DoctorReport
    from ddtree_tui.services.argcheck import ArgCheck
    from ddtree_tui.services.patches import PatchAction, PatchReport, PatchSet

Ref = RefLike
SMOKE_PROMPT = "Say hello in one short sentence."


def launch_line(profile: HostProfile, spec: ServiceSpec) -> str:
    """The command line a launch of `spec` on `profile`'s host runs, as shown to a person (secrets masked)."""
    from ddtree_tui.services.launchline import build_launch

    return build_launch(profile, spec).display()


class ServiceDesk:
    """Service intents and reads over the host registry; `publish` is the fleet's."""

    def __init__(self, hosts: Hosts, publish: Callable[[FleetEvent], None]) -> None:
        self.hosts = hosts
        self._publish = publish
        self.launched: set[ServiceRef] = set()  # what this session launched (the demo's cleanup)

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def launch(self, ref: Ref, *, force: bool = False) -> ActionResult:
        r = ServiceRef.parse(ref)
        h, svc = self.hosts.split(r)
        held = self._foreign_hold(r, "launch")
        if held is not None:
            return held
        self._planned(r, "launch")
        return self._done("launch", r, await h.services.launch(svc, h.extra_specs.get(svc), force=force))

    async def kill(self, ref: Ref, *, timeout: float | None = None) -> ActionResult:
        r = ServiceRef.parse(ref)
        h, svc = self.hosts.split(r)
        held = self._foreign_hold(r, "kill")
        if held is not None:
            return held
        self._planned(r, "kill")
        return self._done("kill", r, await h.services.kill(svc, timeout=timeout))

    async def restart(self, ref: Ref, *, force: bool = False) -> ActionResult:
        r = ServiceRef.parse(ref)
        h, svc = self.hosts.split(r)
        held = self._foreign_hold(r, "restart")
        if held is not None:
            return held
        self._planned(r, "restart")
        return self._done("restart", r, await h.services.restart(svc, force=force))

    def _planned(self, ref: ServiceRef, verb: PlannedVerb, by: str = "user") -> None:
        """Say that `ref` is about to change because someone asked (the alert engine reads it: a restart asked
        for is not a restart loop). Published before the change, so it comes before the states it causes."""
        self._publish(ServicePlanned(host=ref.host, service=ref.service, verb=verb, by=by))

    def _done(self, verb: str, ref: ServiceRef, res: ActionResult) -> ActionResult:
        """Remember what we started (the demo's cleanup) and say how it went."""
        if res.ok:
            (self.launched.discard if verb == "kill" else self.launched.add)(ref)
        self.notice(f"{verb} {ref}", res)
        return res

    async def move(self, ref: Ref, to_host: str, *, startup_timeout: float | None = None) -> ActionResult:
        """Launch the service on `to_host`, wait until ready (`startup_timeout`, default the spec's), then
        kill the old one."""
        r = ServiceRef.parse(ref)
        src, svc = self.hosts.split(r)
        held = self._foreign_hold(r, "move")
        if held is not None:
            return held
        if r.host == to_host:  # not a launch on the same host (it answered "already running", issue 28)
            msg, hint = f"{r} is already on {to_host}: nothing moved", "pick another host to move it to"
            same = ActionResult(ok=False, status=src.services.status(svc), message=msg, suggestion=hint)
            self.notice(f"move {r} -> {to_host}", same)
            return same
        dst = self.hosts.host(to_host)
        dst.adopt(src.spec(svc))
        self._planned(r, "move")
        self._planned(ServiceRef(to_host, svc), "move")
        from ddtree_tui.services.lifecycle import move_service  # loaded with a host (fleet/hosts.py)

        res = await move_service(src.services, dst.services, svc, startup_timeout=startup_timeout)
        if res.ok:
            self.launched.discard(r)
            self.launched.add(ServiceRef(to_host, svc))
        self.notice(f"move {r} -> {to_host}", res)
        return res

    # --- holds (the tuning lab) ----------------------------------------------------------------------------
    def hold(self, ref: Ref, owner: str) -> None:
        """Reserve a service for `owner` (a sweep): launch/kill/restart/move of it are refused for others.
        Raises ServiceHeld when someone else holds it."""
        r = ServiceRef.parse(ref)
        h, svc = self.hosts.split(r)
        h.services.hold(svc, owner)
        try:
            holds.acquire(str(r), owner, holds.place_of(h.profile))  # other processes here see it too
        except ValueError as e:
            h.services.release(svc, owner)
            raise holds.ServiceHeld(str(e)) from None
        self._planned(r, "hold", owner)
        self._publish(Notice(severity="information", text=f"{r} is held by {owner}"))

    def release(self, ref: Ref, owner: str) -> None:
        h, svc = self.hosts.split(ref)
        h.services.release(svc, owner)
        holds.release(str(ServiceRef.parse(ref)), holds.place_of(h.profile))
        self._planned(ServiceRef.parse(ref), "release", owner)

    def _foreign_hold(self, ref: ServiceRef, verb: str) -> ActionResult | None:
        """An ActionResult refusing `verb` when a sweep in another process holds the service (at the same
        place: another checkout's service of the same name is another service)."""
        h, svc = self.hosts.split(ref)
        who = holds.holder(str(ref), holds.place_of(h.profile))
        if who is None:
            return None
        res = ActionResult(
            ok=False,
            message=f"refused to {verb} {ref}: it is held by {who}; nothing was done",
            status=h.services.status(svc),
            suggestion="wait for the sweep to finish, or stop it (it puts the service back as the profile has it)",
        )
        self.notice(f"{verb} {ref}", res)
        return res

    def held_by(self, ref: Ref) -> str | None:
        h, svc = self.hosts.split(ref)
        return h.services.held_by(svc)

    def held_elsewhere(self, ref: Ref) -> str | None:
        """Who holds `ref` from another process on this machine (a sweep), or None."""
        h, _svc = self.hosts.split(ref)
        return holds.holder(str(ServiceRef.parse(ref)), holds.place_of(h.profile))

    # --- one-off specs, waits, reads -----------------------------------------------------------------------
    def current_spec(self, ref: Ref) -> ServiceSpec:
        """The spec the service was last launched with (overrides included)."""
        h, svc = self.hosts.split(ref)
        return h.services.spec(svc)

    async def preflight(self, ref: Ref, spec: ServiceSpec) -> ArgCheck | None:
        """The host parser's verdict on `spec`'s launch line (an ArgCheck, or None for non-sglang)."""
        from ddtree_tui.services import argcheck
        from ddtree_tui.services.launchline import build_launch

        h, _svc = self.hosts.split(ref)
        return await argcheck.preflight(h.transport, h.profile, spec, build_launch(h.profile, spec))

    async def deploy(self, ref: Ref, spec: ServiceSpec, *, holder: str | None = None) -> ActionResult:
        """Kill the service (if running) and launch it with `spec` (an override of its profile spec; the
        profile file is never edited). Returns the launch's ActionResult; wait with `wait_service`."""
        r = ServiceRef.parse(ref)
        h, svc = self.hosts.split(r)
        self._planned(r, "deploy", holder or "user")
        k = await h.services.kill(svc, holder=holder)
        if not k.ok:
            self.notice(f"deploy {r}", k)
            return k
        res = await h.services.launch(svc, spec, holder=holder)
        if res.ok:
            self.launched.add(r)
        self.notice(f"deploy {r}", res)
        return res

    async def wait_service(self, ref: Ref, states: set[str], timeout: float) -> ServiceStatus:
        h, svc = self.hosts.split(ref)
        return await h.services.wait_state(svc, states, timeout)

    async def logs(self, ref: Ref, lines: int = 30) -> list[str]:
        """The last `lines` lines of the service's log, read from the host now (secrets masked)."""
        h, svc = self.hosts.split(ref)
        return list(await h.services.read_log(svc, lines))

    async def follow_log(self, ref: Ref, on_gap: Callable[[str], None] | None = None) -> AsyncIterator[str]:
        """New lines of the service's log as they come, across dropped connections (`on_gap` hears of them)."""
        h, svc = self.hosts.split(ref)
        async for line in h.services.follow_log(svc, on_gap=on_gap):
            yield line

    async def patches(self, action: PatchAction, host: str, sets: Sequence[PatchSet]) -> list[PatchReport]:
        """`status` / `apply` / `revert` each patch set on `host`'s SGLang, over its open transport."""
        h = self.hosts.host(host)
        from ddtree_tui.services.patches import apply_patch, patch_status, revert_patch

        fn = {"status": patch_status, "apply": apply_patch, "revert": revert_patch}[action]
        return [await fn(h.transport, h.profile, ps) for ps in sets]

    async def doctor(self, host: str) -> DoctorReport:
        """Preflight checks of one host over its already-open transport (a DoctorReport)."""
        h = self.hosts.host(host)
        from ddtree_tui.doctor import run_doctor

        return await run_doctor(h.transport, h.profile)

    async def reach(self, host: str) -> str | None:
        """Wait for the host's connection (its connect_timeout and 2 s); None once connected, else why not."""
        h = self.hosts.host(host)
        if await h.transport.wait_connected(h.profile.connect_timeout + 2):
            return None
        err = h.transport.status.error or "not connected"
        return f"cannot reach {h.profile.name} ({h.profile.address}): {err}"

    def notice(self, what: str, res: ActionResult) -> None:
        text = f"{what}: {res.message}" + (f" ({res.suggestion})" if res.suggestion else "")
        self._publish(Notice(severity="information" if res.ok else "error", text=text))

    async def identify(self, ref: Ref) -> TargetIdentity:
        """Who answers on the service's port (issue 29): for a service we launch, whether the listener is our
        process group (remote/listener.py); for an external one, what its /server_info says."""
        r = ServiceRef.parse(ref)
        h, svc = self.hosts.split(r)
        if h.spec(svc).launcher != "external":
            return await h.services.identity(svc, str(r))
        try:
            base = await h.services.base_url(svc)
        except Exception as e:
            return TargetIdentity(
                ref=str(r), kind="external", verdict="unknown", checked_at=time.time(),
                reason=f"no route to {r}: {e}",
            )  # fmt: skip
        return await served_identity(str(r), base, "external")

    async def smoke(
        self,
        ref: Ref,
        prompt: str = SMOKE_PROMPT,
        max_new_tokens: int = 32,
        timeout: float = 30.0,
        api: str = "generate",
        model: str | None = None,
        force: bool = False,
    ) -> SmokeResult:
        """One short /generate request (the post-deploy curl), bounded by `timeout` including the port
        forward; the result (a SmokeResult) is also published as a Notice. Raises only for a bad ref.
        Refused (nothing sent) when the port's listener is not the service we launched, unless `force`."""
        r = ServiceRef.parse(ref)
        h, svc = self.hosts.split(r)
        spec = h.spec(svc)
        deadline = time.monotonic() + timeout
        ident: TargetIdentity | None = None
        refused: str | None = None
        try:
            async with asyncio.timeout(timeout):
                ident = await self.identify(r)
                refused = ident.refusal()
                if refused is not None and force:
                    ident, refused = forced(ident), None
                base = "" if refused else await h.services.base_url(svc)
        except TimeoutError:
            res = failed(str(r), f"no route to the service within {timeout:g} s")
        except Exception as e:
            res = failed(str(r), f"port forward failed: {e}")
        else:
            if refused is not None:
                res = failed(str(r), f"{refused} ({FORCE_HINT})")
            else:
                res = await smoke_request(
                    str(r), base, algorithm=spec.algorithm, mode=spec.display_mode, prompt=prompt,
                    max_new_tokens=max_new_tokens, timeout=max(0.1, deadline - time.monotonic()), api=api,
                    model=model or spec.served_model_name,
                )  # fmt: skip
        res = res.model_copy(update={"identity": ident})
        st = h.statuses.get(svc)
        left = min(5.0, deadline - time.monotonic())
        # a fresh fleet (the headless mode) has not probed yet: ask now, so the error says stopped/crashed
        if not res.ok and (st is None or st.state == "unknown") and left > 0.1:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(left):
                    await h.services.refresh()
            st = h.statuses.get(svc)
        if not res.ok and st is not None and st.state not in ("ready", "unknown"):
            res = res.model_copy(update={"error": f"service is {st.state}; {res.error}"})
        self._publish(Notice(severity="information" if res.ok else "error", text=res.line()))
        return res

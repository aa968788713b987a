"""SGLang checks: each service's exact launch line through the host's own parser, and which DDTree flags and
speculative algorithms the host's build has (from the same parser)."""

from __future__ import annotations

import asyncio

from ddtree_tui.config import HostProfile
from ddtree_tui.doctor.model import Finding, FindingStatus
from ddtree_tui.services import argcheck
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.transport.base import Transport


def _launch_line_finding(profile: HostProfile, name: str, res: argcheck.ArgCheck) -> Finding:
    status: FindingStatus = "ok" if res.ok else "warn" if res.ok is None else "fail"
    fixes: dict[FindingStatus, str | None] = {
        "ok": None,
        "warn": f"run `{profile.python} -c 'import sglang.srt.server_args'` on the host to see why",
        "fail": f"fix [[service]] {name} or [ddtree_flags] in {profile.source or 'the profile'} "
        "(hostprofiles/README.md); a launch is refused until then unless forced",
    }
    return Finding(check=f"launch-line:{name}", status=status, evidence=res.summary(), fix=fixes[status])


def _build_finding(profile: HostProfile, build: argcheck.ArgCheck, uses_ddtree: bool) -> Finding:
    algos = build.algorithms or []
    has_algo = profile.ddtree_flags.algorithm.upper() in {a.upper() for a in algos} if algos else None
    bits = [f"DDTree flags of this build: {', '.join(build.ddtree_flags) or 'none'}"]
    if build.ddtree_env:
        bits.append(f"env knobs: {', '.join(build.ddtree_env)}")
    if algos:
        bits.append(
            f"speculative algorithm {profile.ddtree_flags.algorithm} "
            + ("known" if has_algo else f"unknown (known: {', '.join(algos)})")
        )
    status: FindingStatus = "fail" if uses_ddtree and (not build.ddtree_flags or has_algo is False) else "ok"
    return Finding(
        check="ddtree-build",
        status=status,
        evidence=f"SGLang {build.version or '?'}: " + "; ".join(bits),
        fix=None
        if status == "ok"
        else "this build has no DDTree: install the patched build, or set [ddtree_flags] to its "
        "spelling (hostprofiles/README.md)",
    )


async def launch_line_findings(t: Transport, profile: HostProfile) -> list[Finding]:
    svcs = [s for s in profile.service if s.launcher == "sglang"]
    if not svcs:
        return []
    cmds = [build_launch(profile, s) for s in svcs]
    checks = await asyncio.gather(
        *(argcheck.preflight(t, profile, s, c) for s, c in zip(svcs, cmds, strict=True))
    )
    out: list[Finding] = []
    build: argcheck.ArgCheck | None = None
    for s, res in zip(svcs, checks, strict=True):
        if res is None:
            continue
        if res.ok is not None:
            build = build or res
        out.append(_launch_line_finding(profile, s.name, res))
    if build is not None:
        out.append(_build_finding(profile, build, any(s.algorithm == "ddtree" for s in svcs)))
    return out

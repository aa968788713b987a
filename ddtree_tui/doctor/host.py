"""Host checks: the workdir (trust, writable) and the disk under it."""

from __future__ import annotations

from ddtree_tui.doctor.facts import ProbeReply, Workdir
from ddtree_tui.doctor.model import Finding, FindingStatus

DISK_FAIL_MB = 1024
DISK_WARN_MB = 10 * 1024
# below the limit: (status, fix); the first row whose limit the free space is under decides
DISK_LEVELS: tuple[tuple[int, FindingStatus, str], ...] = (
    (DISK_FAIL_MB, "fail", "free disk space for logs"),
    (DISK_WARN_MB, "warn", "logs of a long run need space"),
)


def _workdir_finding(wd: Workdir) -> Finding:
    if wd.trust:
        return Finding(
            check="workdir",
            status="fail",
            evidence=wd.trust,
            fix="launch, kill and status refuse this workdir until it is fixed",
        )
    if wd.writable:
        note = "" if wd.exists else f" (will be created under {wd.existing})"
        return Finding(check="workdir", status="ok", evidence=f"{wd.path} is writable{note}")
    return Finding(
        check="workdir",
        status="fail",
        evidence=f"{wd.path} is not writable{': ' + wd.error if wd.error else ''}",
        fix="choose a writable workdir in the profile, or fix its permissions",
    )


def _disk_finding(free: int, where: str | None) -> Finding:
    ev = f"{free} MiB free on the filesystem of {where}"
    for limit, status, fix in DISK_LEVELS:
        if free < limit:
            return Finding(check="disk", status=status, evidence=ev, fix=fix)
    return Finding(check="disk", status="ok", evidence=ev)


def host_findings(probe: ProbeReply) -> list[Finding]:
    wd = probe.workdir
    if wd is None:
        return []
    out = [_workdir_finding(wd)]
    if wd.free_mb is not None:
        out.append(_disk_finding(wd.free_mb, wd.existing))
    return out

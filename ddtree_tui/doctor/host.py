"""Host checks: the workdir (trust, writable) and the disk under it."""

from __future__ import annotations

from typing import Any

from ddtree_tui.doctor.model import Finding, FindingStatus

DISK_FAIL_MB = 1024
DISK_WARN_MB = 10 * 1024
# below the limit: (status, fix); the first row whose limit the free space is under decides
DISK_LEVELS: tuple[tuple[int, FindingStatus, str], ...] = (
    (DISK_FAIL_MB, "fail", "free disk space for logs"),
    (DISK_WARN_MB, "warn", "logs of a long run need space"),
)


def _workdir_finding(wd: dict[str, Any]) -> Finding:
    if wd.get("trust"):
        return Finding(
            check="workdir",
            status="fail",
            evidence=str(wd["trust"]),
            fix="launch, kill and status refuse this workdir until it is fixed",
        )
    if wd.get("writable"):
        note = "" if wd.get("exists") else f" (will be created under {wd.get('existing')})"
        return Finding(check="workdir", status="ok", evidence=f"{wd['path']} is writable{note}")
    return Finding(
        check="workdir",
        status="fail",
        evidence=f"{wd['path']} is not writable{': ' + wd['error'] if wd.get('error') else ''}",
        fix="choose a writable workdir in the profile, or fix its permissions",
    )


def _disk_finding(free: int, where: Any) -> Finding:
    ev = f"{free} MiB free on the filesystem of {where}"
    for limit, status, fix in DISK_LEVELS:
        if free < limit:
            return Finding(check="disk", status=status, evidence=ev, fix=fix)
    return Finding(check="disk", status="ok", evidence=ev)


def host_findings(probe: dict[str, Any]) -> list[Finding]:
    wd = probe.get("workdir") or {}
    if not wd:
        return []
    out = [_workdir_finding(wd)]
    free = wd.get("free_mb")
    if free is not None:
        out.append(_disk_finding(free, wd.get("existing")))
    return out

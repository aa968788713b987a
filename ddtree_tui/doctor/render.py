"""The report as text a person reads (the CLI, the TUI's doctor dialog uses collapse_unneeded)."""

from __future__ import annotations

from collections.abc import Sequence

from ddtree_tui.doctor.model import DoctorReport, Finding
from ddtree_tui.doctor.packages import UNNEEDED

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def collapse_unneeded(findings: Sequence[Finding]) -> list[Finding]:
    """The packages that are missing but needed by no service of the profile, as one WARN line instead of
    one each (the demo showed six of them among seven WARNs). The report itself keeps every finding."""
    unneeded = [f for f in findings if f.status == "warn" and f.evidence.endswith(UNNEEDED)]
    if len(unneeded) < 2:
        return list(findings)
    names = ", ".join(f.check for f in unneeded)
    merged = Finding(
        check="unused packages",
        status="warn",
        evidence=f"not installed, and no service of this profile needs them: {names}",
    )
    out: list[Finding] = []
    for f in findings:
        if f in unneeded:
            if merged not in out:
                out.append(merged)
            continue
        out.append(f)
    return out


def render(report: DoctorReport) -> str:
    """The report a person reads: one line a finding, the fix under anything that is not ok."""
    findings = collapse_unneeded(report.findings)
    n = {s: sum(1 for f in findings if f.status == s) for s in ("ok", "warn", "fail")}
    lines = [f"doctor {report.host} ({report.address}): {n['ok']} ok, {n['warn']} warn, {n['fail']} fail"]
    width = max((len(f.check) for f in findings), default=8)
    for f in findings:
        lines.append(f"  {_MARK[f.status]}  {f.check:<{width}}  {f.evidence}")
        if f.fix and f.status != "ok":
            lines.append(f"        {'':<{width}}  fix: {f.fix}")
    return "\n".join(lines)

"""One host's doctor run: the probe program in the host's own Python (with the profile's env), nvidia-smi,
then every check family over what they found, in the order a person reads them."""

from __future__ import annotations

import asyncio
import json

from ddtree_tui.config import HostProfile
from ddtree_tui.doctor.facts import ProbeReply, SmiFacts, SmiFailed, parse_reply
from ddtree_tui.doctor.gpu import collect, gpu_findings
from ddtree_tui.doctor.host import host_findings
from ddtree_tui.doctor.model import DoctorReport, Finding, needs_gpu, run_quiet, tail
from ddtree_tui.doctor.packages import PACKAGES, UNNEEDED, cuda_findings, pkg_findings
from ddtree_tui.doctor.services import service_findings
from ddtree_tui.doctor.sglang import launch_line_findings
from ddtree_tui.remote import source
from ddtree_tui.transport.base import RunResult, Transport

PROBE_TIMEOUT = 180.0  # importing torch + sglang on a cold disk can take a minute
PROBE = source("probe")  # ddtree_tui/remote/probe.py: Python >= 3.6, standard library only
MARKER = "@@DDTREE-DOCTOR@@"


def _probe_request(profile: HostProfile, packages: bool) -> dict[str, object]:
    paths: list[str] = []
    models: list[str] = []
    for s in profile.service:
        if s.launcher != "sglang":
            continue
        for p in (s.model, s.draft_model):
            if p and p not in paths:
                paths.append(p)
        if s.model and s.model not in models:
            models.append(s.model)
    return {
        "packages": list(PACKAGES) if packages else [],
        "workdir": profile.workdir,
        "paths": paths,
        "models": models,
        "services": [{"name": s.name, "port": s.port, "bind": s.bind} for s in profile.service],
    }


def _parse_probe(res: RunResult) -> ProbeReply | str | None:
    """The reply on the probe's marked line, parsed once, here: a ProbeReply, or what is wrong with it in
    words (not JSON, or the field that does not match remote/probe.py's shape); None when no line is marked."""
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except json.JSONDecodeError as e:
                return f"not JSON ({e})"
            return parse_reply(data)
    return None


async def _probe(
    t: Transport, profile: HostProfile, python: str, packages: bool
) -> tuple[ProbeReply | None, str]:
    req = json.dumps(_probe_request(profile, packages))
    res = await run_quiet(t, [python, "-c", PROBE], input=req, env=profile.env or None, timeout=PROBE_TIMEOUT)
    got = _parse_probe(res)
    if isinstance(got, ProbeReply):
        return got, ""
    if got is not None:
        return None, f"its reply does not match remote/probe.py's shape: {got}"
    if res.timed_out:
        return None, f"the probe did not finish in {PROBE_TIMEOUT:.0f} s"
    return None, tail(res.stderr or res.stdout) or f"exit status {res.exit_status}"


async def _python_probe(
    t: Transport, profile: HostProfile
) -> tuple[ProbeReply | None, Finding, SmiFacts | SmiFailed]:
    """(the probe's facts or None, the python finding, nvidia-smi's facts); a profile python that cannot
    run the probe falls back to the system python3 for the host-side checks (paths, ports, workdir)."""
    (probe, perr), smi = await asyncio.gather(
        _probe(t, profile, profile.python, True), collect(t, profile.env or None)
    )
    if probe is not None:
        ok = Finding(check="python", status="ok", evidence=f"Python {probe.python} at {probe.executable}")
        return probe, ok, smi
    failed = Finding(
        check="python",
        status="fail",
        evidence=f"{profile.python} could not run the probe: {perr}",
        fix="set python in the profile to the interpreter of the SGLang environment",
    )
    if profile.python != "python3":
        probe, _ = await _probe(t, profile, "python3", False)
    return probe, failed, smi


async def run_doctor(transport: Transport, profile: HostProfile) -> DoctorReport:
    """Every preflight check of one host, through a transport that is started here if needed."""
    report = DoctorReport(host=profile.name, address=profile.address)
    if transport.status.state != "connected":
        await transport.start()
    if not await transport.wait_connected(profile.connect_timeout):
        report.findings.append(
            Finding(
                check="connection",
                status="fail",
                evidence=f"cannot reach {profile.address}: {transport.status.error or 'not connected'}",
                fix="check the ssh config alias, keys and known_hosts (ssh to it by hand once)",
            )
        )
        return report
    probe, python, smi = await _python_probe(transport, profile)
    findings = [python]
    if probe is not None:
        findings += pkg_findings(profile, probe)
        findings += cuda_findings(probe, smi)
    findings += gpu_findings(profile, probe, smi)
    if probe is not None:
        findings += service_findings(profile, probe)
        findings += host_findings(probe)
        if (sglang := probe.packages.get("sglang")) is not None and sglang.ok:
            findings += await launch_line_findings(transport, profile)
    else:
        findings.append(
            Finding(
                check="host-checks",
                status="warn",
                evidence="paths, ports, workdir and disk were not checked: no Python ran on the host",
                fix="install python3 on the host",
            )
        )
    if simulated(profile):
        findings = simulated_findings(findings)
    report.findings = findings
    # the facts as the probe and nvidia-smi gave them, for --json
    report.facts = {"probe": probe.as_json() if probe else None, "nvidia_smi": smi.model_dump(mode="json")}
    return report


def simulated(profile: HostProfile) -> bool:
    """A profile that runs no SGLang server and simulates or replays what it shows (the demo): no GPU driver
    and no SGLang package is needed on it."""
    sim = any(s.launcher == "sim" for s in profile.service) or profile.telemetry.source == "replay"
    return sim and not needs_gpu(profile)


def simulated_findings(findings: list[Finding]) -> list[Finding]:
    """A simulated profile's findings: said to be simulated first, without the warnings that only matter to
    a real SGLang host (nvidia-smi missing, packages no service needs), which were noise in the demo."""
    note = Finding(
        check="simulated",
        status="ok",
        evidence="simulated: the services are SIMULATED (launcher sim) and the GPU telemetry a REPLAY; "
        "no GPU driver or SGLang package is needed here",
    )
    kept = [
        f
        for f in findings
        if not (f.check == "nvidia-smi" and f.status != "ok")
        and not (f.status == "warn" and f.evidence.endswith(UNNEEDED))
    ]
    return [note, *kept]

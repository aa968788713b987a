"""Preflight checks of a host: the environment traps that cost hours on a new host, caught before a launch.

One probe program runs in the host's own Python (with the profile's env) and reports, as JSON, package
versions and import errors, CUDA runtime libraries reachable and loaded, model configs, paths, ports, the
workdir and disk. nvidia-smi gives GPUs, driver and the driver's CUDA version. Each finding says what is
wrong and the fix. A missing python or nvidia-smi is a finding, never a crash.

One module per family of checks (packages, gpu, services, host, sglang) over the typed facts of `facts.py`
(the probe's reply, nvidia-smi's answers), `run.py` runs them, `render.py` prints; the names below are the package's public face (the UI, the CLI, Fleet and the tests use them).
"""

from __future__ import annotations

from ddtree_tui.doctor.facts import ProbeReply, SmiFacts, SmiFailed, SmiGpu, parse_reply
from ddtree_tui.doctor.gpu import (
    DEFAULT_MEM_FRACTION,
    SMI_FIELDS,
    SMI_FIELDS_OLD,
    SMI_TIMEOUT,
    gpu_findings,
    parse_driver_cuda,
    parse_smi_apps,
    parse_smi_gpus,
)
from ddtree_tui.doctor.host import DISK_FAIL_MB, DISK_WARN_MB, host_findings
from ddtree_tui.doctor.model import DoctorReport, Finding, FindingStatus
from ddtree_tui.doctor.packages import PACKAGES, UNNEEDED, cuda_findings, pkg_findings
from ddtree_tui.doctor.render import collapse_unneeded, render
from ddtree_tui.doctor.run import MARKER, PROBE, PROBE_TIMEOUT, run_doctor
from ddtree_tui.doctor.services import is_hybrid, service_findings
from ddtree_tui.doctor.sglang import launch_line_findings

__all__ = [
    "DEFAULT_MEM_FRACTION",
    "DISK_FAIL_MB",
    "DISK_WARN_MB",
    "MARKER",
    "PACKAGES",
    "PROBE",
    "PROBE_TIMEOUT",
    "SMI_FIELDS",
    "SMI_FIELDS_OLD",
    "SMI_TIMEOUT",
    "UNNEEDED",
    "DoctorReport",
    "Finding",
    "FindingStatus",
    "ProbeReply",
    "SmiFacts",
    "SmiFailed",
    "SmiGpu",
    "collapse_unneeded",
    "cuda_findings",
    "gpu_findings",
    "host_findings",
    "is_hybrid",
    "launch_line_findings",
    "parse_driver_cuda",
    "parse_reply",
    "parse_smi_apps",
    "parse_smi_gpus",
    "pkg_findings",
    "render",
    "run_doctor",
    "service_findings",
]

"""GPU checks: what nvidia-smi says (GPUs, lost GPUs, the driver's CUDA, who holds memory) and whether each
SGLang service fits on its GPUs (free memory against mem_fraction_static, other processes, SM120 traps).

The CSV is read by the telemetry's nvidia-smi parser (`telemetry/nvsmi.py`), one parser for the whole tool.
"""

from __future__ import annotations

import asyncio

from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.doctor.facts import ProbeReply, SmiApp, SmiFacts, SmiFailed, SmiGpu
from ddtree_tui.doctor.model import Finding, FindingStatus, fail, major_minor, needs_gpu, run_quiet, tail
from ddtree_tui.remote.smi import cuda_from_smi
from ddtree_tui.telemetry.nvsmi import detect_fault, is_missing, query_rows
from ddtree_tui.transport.base import Transport

SMI_TIMEOUT = 30.0
DEFAULT_MEM_FRACTION = 0.85  # roughly what SGLang picks on a big GPU when none is given
SMI_FIELDS = "index,uuid,name,compute_cap,driver_version,memory.total,memory.used"
SMI_FIELDS_OLD = "index,uuid,name,driver_version,memory.total,memory.used"  # drivers without compute_cap
APPS_FIELDS = "pid,process_name,used_memory,gpu_uuid"
LOST_CELLS = ("[GPU is lost]", "[Unknown Error]")  # a row of a GPU that fell off the bus


def _val(s: str | None) -> str | None:
    s = (s or "").strip()
    return None if is_missing(s) or s.startswith("[") else s


def _int(s: str | None) -> int | None:
    v = _val(s)
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def parse_smi_gpus(text: str, fields: str = SMI_FIELDS) -> list[SmiGpu]:
    """Rows of `--query-gpu=<fields> --format=csv,noheader,nounits`; a bad row is skipped, not fatal."""
    return [
        SmiGpu(
            index=int(row["index"]),
            uuid=_val(row.get("uuid")),
            name=_val(row.get("name")),
            compute_cap=_val(row.get("compute_cap")),
            driver_version=_val(row.get("driver_version")),
            mem_total_mb=_int(row.get("memory.total")),
            mem_used_mb=_int(row.get("memory.used")),
        )
        for row in query_rows(text, fields.split(","))
    ]


def parse_smi_apps(text: str) -> list[SmiApp]:
    """Rows of `--query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits`."""
    return [
        SmiApp(pid=int(r["pid"]), name=r["process_name"], used_mb=_int(r["used_memory"]), gpu_uuid=r["uuid"])
        for r in query_rows(text, APPS_FIELDS.split(","))
    ]


def parse_driver_cuda(text: str) -> str | None:
    """The driver's CUDA version from plain nvidia-smi's header (the sampler's reading of it)."""
    return cuda_from_smi(text)


def _query(fields: str) -> list[str]:
    return ["nvidia-smi", f"--query-{'compute-apps' if fields == APPS_FIELDS else 'gpu'}={fields}",
            "--format=csv,noheader,nounits"]  # fmt: skip


async def collect(t: Transport, env: dict[str, str] | None = None) -> SmiFacts | SmiFailed:
    """GPUs, their processes and the driver's CUDA version; SmiFailed when nvidia-smi cannot answer."""
    fields = SMI_FIELDS
    q = await run_quiet(t, _query(fields), timeout=SMI_TIMEOUT, env=env)
    if q.exit_status not in (0, 127) and "not a valid field" in (q.stdout + q.stderr):
        fields = SMI_FIELDS_OLD
        q = await run_quiet(t, _query(fields), timeout=SMI_TIMEOUT, env=env)
    # a GPU that fell off the bus: its row reads "[GPU is lost]" / "[Unknown Error]", or nvidia-smi cannot
    # even get its handle; nvidia-smi may then exit non-zero while still printing the other GPUs' rows
    handle_errors = [
        line.strip() for line in q.stdout.splitlines() if (f := detect_fault(line)) and f[0] == "handle"
    ]
    lost: dict[int, str] = {}
    for row in query_rows(q.stdout, fields.split(",")):
        bad = [c for k, c in row.items() if k != "index" and c in LOST_CELLS]
        if bad:
            lost[int(row["index"])] = bad[0]
    if not q.ok and not (parse_smi_gpus(q.stdout, fields) or lost or handle_errors):
        err = tail(q.stderr or q.stdout) or f"exit status {q.exit_status}"
        missing = q.exit_status == 127 or "not found" in err or "No such file" in err
        return SmiFailed(error=err, missing=missing)
    head, apps = await asyncio.gather(
        run_quiet(t, ["nvidia-smi"], timeout=SMI_TIMEOUT, env=env),
        run_quiet(t, _query(APPS_FIELDS), timeout=SMI_TIMEOUT, env=env),
    )
    gpus = [g for g in parse_smi_gpus(q.stdout, fields) if g.index not in lost]
    return SmiFacts(
        gpus=gpus,
        lost=lost,
        handle_errors=handle_errors,
        driver_cuda=parse_driver_cuda(head.stdout),
        apps=parse_smi_apps(apps.stdout) if apps.ok else [],
        raw_error=None if gpus else tail(q.stdout),
    )


def _service_gpus(svc: ServiceSpec, gpus: list[SmiGpu]) -> list[SmiGpu]:
    idx = svc.gpus or ([0] if gpus else [])
    return [g for g in gpus if g.index in idx]


def _our_pids(probe: ProbeReply | None) -> dict[int, str]:
    ports = (probe.ports if probe else None) or []
    return {p.pidfile_pid: p.name for p in ports if p.pidfile_pid and p.pidfile_alive}


def _smi_failed(profile: HostProfile, smi: SmiFailed) -> Finding:
    if smi.missing:
        ev, fix = (
            "nvidia-smi is not installed or not on the PATH",
            "install the NVIDIA driver (nvidia-smi comes with it)",
        )
    else:
        ev, fix = (
            f"nvidia-smi failed: {smi.error}",
            "check the driver: `nvidia-smi` on the host, dmesg for Xid",
        )
    return Finding(check="nvidia-smi", status="fail" if needs_gpu(profile) else "warn", evidence=ev, fix=fix)


def _lost_findings(profile: HostProfile, smi: SmiFacts) -> list[Finding]:
    out = [
        Finding(
            check="gpu-lost",
            status="fail" if needs_gpu(profile) else "warn",
            evidence=f"nvidia-smi: {line}",
            fix="the GPU fell off the bus: check dmesg for Xid 79, reset it (nvidia-smi -r) or reboot",
        )
        for line in smi.handle_errors
    ]
    for idx, what in sorted(smi.lost.items()):
        users = [s.name for s in profile.service if s.launcher == "sglang" and idx in s.gpus]
        out.append(
            Finding(
                check=f"gpu-lost:{idx}",
                status="fail" if users else "warn",
                evidence=f"GPU {idx} reports {what} (fell off the bus)"
                + (f"; service(s) {', '.join(users)} run on it" if users else "; no service here uses it"),
                fix="check dmesg for Xid 79, reset the GPU (nvidia-smi -r -i N) or reboot; move the service "
                "to another GPU or host meanwhile",
            )
        )
    return out


def _memory_findings(s: ServiceSpec, g: SmiGpu, apps: list[SmiApp], ours: dict[int, str]) -> list[Finding]:
    """Free memory of one of the service's GPUs against mem_fraction_static, and who else holds it."""
    total, used = g.mem_total_mb, g.mem_used_mb
    if total is None or used is None:
        return []
    out: list[Finding] = []
    free = total - used
    frac = s.mem_fraction_static
    need = int(total * (frac if frac is not None else DEFAULT_MEM_FRACTION))
    holders = [a for a in apps if a.gpu_uuid and a.gpu_uuid == g.uuid]
    own = [a for a in holders if a.pid in ours and ours[a.pid] == s.name]
    ev = (
        f"GPU {g.index}: {free} MiB free of {total}; mem_fraction_static "
        f"{frac if frac is not None else f'unset (~{DEFAULT_MEM_FRACTION})'} needs ~{need} MiB"
    )
    fits = free >= need or bool(own)
    status: FindingStatus = "ok" if fits else "fail" if frac is not None else "warn"
    out.append(
        Finding(
            check=f"gpu-memory:{s.name}",
            status=status,
            evidence=ev + (" (used by this service itself)" if own and free < need else ""),
            fix=None
            if fits
            else f"free GPU {g.index} (see gpu-processes), pick another GPU, or lower "
            f"mem_fraction_static to ≤ {max(0.05, round(free / total - 0.02, 2)):.2f}",
        )
    )
    others = [a for a in holders if a.pid not in ours]
    if others:
        who = ", ".join(f"pid {a.pid} {a.name} ({a.used_mb} MiB)" for a in others)
        out.append(
            Finding(
                check=f"gpu-processes:{s.name}",
                status="warn",
                evidence=f"GPU {g.index} already runs: {who}",
                fix="stop them or choose another GPU for this service",
            )
        )
    return out


def _sm120_findings(s: ServiceSpec, mine: list[SmiGpu], nvcc: str | None) -> list[Finding]:
    """Blackwell SM120 traps: trtllm_mha is SM100-only; flashinfer JIT needs nvcc ≥ 12.9 (`nvcc`: its
    version, None when none was found)."""
    sm12 = [g.index for g in mine if (g.compute_cap or "").startswith("12.")]
    if not sm12:
        return []
    backends = {b for b in (s.attention_backend, s.draft_attention_backend) if b}
    nvcc_v = major_minor(nvcc)
    traps: list[tuple[bool, FindingStatus, str, str]] = [
        (
            "trtllm_mha" in backends,
            "fail",
            f"service {s.name} asks for trtllm_mha on SM120 GPU(s) {sm12}; trtllm_mha is SM100-only",
            'set attention_backend = "triton" (--attention-backend triton)',
        ),
        (
            "flashinfer" in backends and (nvcc_v is None or nvcc_v < (12, 9)),
            "warn",
            f"flashinfer on SM120 GPU(s) {sm12} JIT-compiles with nvcc ≥ 12.9; nvcc is {nvcc or 'not found'}",
            'set attention_backend = "triton" (--attention-backend triton), or install CUDA ≥ 12.9',
        ),
    ]
    return [
        Finding(check=f"sm120:{s.name}", status=st, evidence=ev, fix=fix) for hit, st, ev, fix in traps if hit
    ]


def gpu_findings(profile: HostProfile, probe: ProbeReply | None, smi: SmiFacts | SmiFailed) -> list[Finding]:
    """nvidia-smi's GPUs, and each SGLang service's GPUs against them (`probe`: the probe's reply, None
    when no Python ran it: then no pid is known to be ours and no nvcc)."""
    if isinstance(smi, SmiFailed):
        return [_smi_failed(profile, smi)]
    gpus = smi.gpus
    out = _lost_findings(profile, smi)
    if not gpus and (smi.lost or smi.handle_errors):
        return out
    if not gpus:
        out.append(
            fail(
                "gpus",
                f"nvidia-smi reports no GPU ({smi.raw_error or 'empty output'})",
                "check the driver and that the GPUs are visible (No devices were found?)",
            )
        )
        return out
    names = sorted({g.name or "?" for g in gpus})
    drivers = sorted({g.driver_version or "?" for g in gpus})
    caps = sorted({g.compute_cap or "?" for g in gpus})
    out.append(
        Finding(
            check="gpus",
            status="ok",
            evidence=f"{len(gpus)} GPU(s): {', '.join(names)}; compute capability {', '.join(caps)}; "
            f"driver {', '.join(drivers)}, CUDA {smi.driver_cuda or '?'}",
        )
    )
    by_index = {g.index: g for g in gpus}
    ours = _our_pids(probe)
    nvcc = probe.nvcc.version if probe and probe.nvcc else None
    for s in profile.service:
        if s.launcher != "sglang":
            continue
        missing = [i for i in s.gpus if i not in by_index]
        if missing:
            out.append(
                fail(
                    f"gpus:{s.name}",
                    f"service {s.name} asks for GPU(s) {missing}; the host has {sorted(by_index)}",
                    f"set gpus in [[service]] {s.name} to existing indices",
                )
            )
        mine = _service_gpus(s, gpus)
        for g in mine:
            out += _memory_findings(s, g, smi.apps, ours)
        out += _sm120_findings(s, mine, nvcc)
    return out

"""Preflight checks of a host: the environment traps that cost hours on a new host, caught before a launch.

One probe program runs in the host's own Python (with the profile's env) and reports, as JSON, package
versions and import errors, CUDA runtime libraries reachable and loaded, model configs, paths, ports, the
workdir and disk. nvidia-smi gives GPUs, driver and the driver's CUDA version. Each finding says what is
wrong and the fix. A missing python or nvidia-smi is a finding, never a crash.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.remote import source
from ddtree_tui.transport.base import RunResult, Transport, TransportError

FindingStatus = Literal["ok", "warn", "fail"]
PACKAGES = ("torch", "sglang", "sgl_kernel", "flashinfer", "triton", "transformers")
PROBE_TIMEOUT = 180.0  # importing torch + sglang on a cold disk can take a minute
SMI_TIMEOUT = 30.0
DISK_FAIL_MB = 1024
DISK_WARN_MB = 10 * 1024
DEFAULT_MEM_FRACTION = 0.85  # roughly what SGLang picks on a big GPU when none is given
SMI_FIELDS = "index,uuid,name,compute_cap,driver_version,memory.total,memory.used"
SMI_FIELDS_OLD = "index,uuid,name,driver_version,memory.total,memory.used"  # drivers without compute_cap


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

    check: str
    status: FindingStatus
    evidence: str
    fix: str | None = None


class DoctorReport(BaseModel):
    host: str
    address: str = ""
    findings: list[Finding] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)  # the raw probe / nvidia-smi facts, for --json

    @property
    def worst(self) -> FindingStatus:
        st = {f.status for f in self.findings}
        return "fail" if "fail" in st else "warn" if "warn" in st else "ok"


# --- the probe program (runs on the host; Python >= 3.6, standard library only) ---------------------------

PROBE = source("probe")  # ddtree_tui/remote/probe.py

MARKER = "@@DDTREE-DOCTOR@@"


def _probe_request(profile: HostProfile, packages: bool) -> dict[str, Any]:
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


def _parse_probe(res: RunResult) -> dict[str, Any] | None:
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except json.JSONDecodeError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _tail(text: str, n: int = 300) -> str:
    t = " ".join(text.strip().split())
    return t if len(t) <= n else "…" + t[-n:]


async def _run(t: Transport, argv: Sequence[str], **kw: Any) -> RunResult:
    try:
        return await t.run(argv, **kw)
    except TransportError as e:
        return RunResult(argv=list(argv), exit_status=None, stdout="", stderr=str(e), duration_s=0.0)


# --- nvidia-smi -----------------------------------------------------------------------------------------


class SmiGpu(BaseModel):
    index: int
    uuid: str | None = None
    name: str | None = None
    compute_cap: str | None = None
    driver_version: str | None = None
    mem_total_mb: int | None = None
    mem_used_mb: int | None = None


def _val(s: str) -> str | None:
    s = s.strip()
    return None if not s or s.startswith("[") else s


def _int(s: str) -> int | None:
    v = _val(s)
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def parse_smi_gpus(text: str, fields: str = SMI_FIELDS) -> list[SmiGpu]:
    """Rows of `--query-gpu=<fields> --format=csv,noheader,nounits`; a bad row is skipped, not fatal."""
    names = fields.split(",")
    out: list[SmiGpu] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(names) or _int(cells[0]) is None:
            continue
        row = dict(zip(names, cells, strict=True))
        out.append(
            SmiGpu(
                index=int(cells[0]),
                uuid=_val(row.get("uuid", "")),
                name=_val(row.get("name", "")),
                compute_cap=_val(row.get("compute_cap", "")),
                driver_version=_val(row.get("driver_version", "")),
                mem_total_mb=_int(row.get("memory.total", "")),
                mem_used_mb=_int(row.get("memory.used", "")),
            )
        )
    return out


def parse_smi_apps(text: str) -> list[dict[str, Any]]:
    """Rows of `--query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits`."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 4 or _int(cells[0]) is None:
            continue
        out.append({"pid": int(cells[0]), "name": cells[1], "used_mb": _int(cells[2]), "gpu_uuid": cells[3]})
    return out


def parse_driver_cuda(text: str) -> str | None:
    m = re.search(r"CUDA Version:\s*(\d+\.\d+)", text)
    return m.group(1) if m else None


async def _smi(t: Transport, env: dict[str, str] | None = None) -> dict[str, Any]:
    """GPUs, their processes and the driver's CUDA version; {"error": ...} when nvidia-smi cannot answer."""
    q = await _run(
        t,
        ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
        timeout=SMI_TIMEOUT,
        env=env,
    )
    fields = SMI_FIELDS
    if q.exit_status not in (0, 127) and "not a valid field" in (q.stdout + q.stderr):
        fields = SMI_FIELDS_OLD
        q = await _run(
            t,
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            timeout=SMI_TIMEOUT,
            env=env,
        )
    # a GPU that fell off the bus: its row reads "[GPU is lost]" / "[Unknown Error]", or nvidia-smi cannot
    # even get its handle; nvidia-smi may then exit non-zero while still printing the other GPUs' rows
    lost: dict[int, str] = {}
    handle_errors: list[str] = []
    for line in q.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if "Unable to determine the device handle" in line:
            handle_errors.append(line.strip())
        elif _int(cells[0]) is not None and any(c in ("[GPU is lost]", "[Unknown Error]") for c in cells[1:]):
            lost[int(cells[0])] = next(c for c in cells[1:] if c in ("[GPU is lost]", "[Unknown Error]"))
    if not q.ok and not (parse_smi_gpus(q.stdout, fields) or lost or handle_errors):
        err = _tail(q.stderr or q.stdout) or f"exit status {q.exit_status}"
        missing = q.exit_status == 127 or "not found" in err or "No such file" in err
        return {"error": err, "missing": missing}
    head, apps = await asyncio.gather(
        _run(t, ["nvidia-smi"], timeout=SMI_TIMEOUT, env=env),
        _run(
            t,
            [
                "nvidia-smi",
                "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                "--format=csv,noheader,nounits",
            ],
            timeout=SMI_TIMEOUT,
            env=env,
        ),
    )
    gpus = [g for g in parse_smi_gpus(q.stdout, fields) if g.index not in lost]
    return {
        "gpus": [g.model_dump() for g in gpus],
        "lost": {str(k): v for k, v in lost.items()},
        "handle_errors": handle_errors,
        "driver_cuda": parse_driver_cuda(head.stdout),
        "apps": parse_smi_apps(apps.stdout) if apps.ok else [],
        "raw_error": None if gpus else _tail(q.stdout),
    }


# --- judging --------------------------------------------------------------------------------------------


def _major_minor(v: str | None) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", v or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _is_hybrid(cfg: dict[str, Any] | None) -> str | None:
    """Why a model config is hybrid (linear attention / Mamba layers), or None."""
    if not cfg:
        return None
    kinds = [k.lower() for k in cfg.get("layer_kinds") or []]
    hits = sorted({k for k in kinds if "linear" in k or "mamba" in k or k in ("hybrid_override_pattern",)})
    if hits:
        return f"layer types {', '.join(hits)}"
    for mt in (cfg.get("model_type"), cfg.get("text_model_type")):
        mt = (mt or "").lower()
        if mt.startswith(("qwen3_next", "qwen3_5", "qwen3.5", "qwen3_6")) or "mamba" in mt or "jamba" in mt:
            return f"model_type {mt}"
    return None


def _pkg_findings(profile: HostProfile, probe: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    pk: dict[str, Any] = probe.get("packages") or {}
    py = profile.python
    uses_sglang = any(s.launcher == "sglang" for s in profile.service)
    uses_flashinfer = any(
        "flashinfer" in (s.attention_backend or "") + (s.draft_attention_backend or "")
        for s in profile.service
        if s.launcher == "sglang"
    )
    for name in PACKAGES:
        info = pk.get(name)
        if info is None:
            continue
        # the kernels' distribution is sglang-kernel since 0.5.x (0.5.23 pins sglang-kernel==0.4.10; the old
        # sgl-kernel stopped at 0.3.21); the import name is still sgl_kernel
        dist = {"sgl_kernel": "sglang-kernel", "flashinfer": "flashinfer-python"}.get(name, name)
        if info.get("ok"):
            ev = f"{name} {info.get('version') or '?'}"
            if name == "torch":
                ev += f" (CUDA build {info.get('cuda') or 'none: CPU-only build'})"
                if info.get("cuda_error"):
                    ev += f"; CUDA error: {_tail(info['cuda_error'], 200)}"
                elif info.get("cuda_available"):
                    caps = ", ".join(f"{a}.{b}" for a, b in info.get("capabilities") or [])
                    ev += f", CUDA available, {info.get('device_count')} device(s), capability {caps or '?'}"
                else:
                    ev += ", CUDA not available"
                if not info.get("cuda"):
                    out.append(
                        Finding(
                            check="torch",
                            status="fail",
                            evidence=ev,
                            fix=f"install a CUDA build of torch into {py} (e.g. the cu128 or cu130 wheel index)",
                        )
                    )
                    continue
                if not info.get("cuda_available"):
                    out.append(
                        Finding(
                            check="torch",
                            status="fail",
                            evidence=ev,
                            fix="torch cannot use the GPU: compare its CUDA build with the driver (see cuda-driver)",
                        )
                    )
                    continue
            out.append(Finding(check=name, status="ok", evidence=ev))
            continue
        err = str(info.get("error") or "import failed")
        if info.get("missing"):
            needed = (
                name in ("torch", "sglang", "sgl_kernel", "triton", "transformers") and uses_sglang
            ) or (name == "flashinfer" and uses_flashinfer)
            why = "" if needed else " (no service of this profile needs it)"
            out.append(
                Finding(
                    check=name,
                    status="fail" if needed else "warn",
                    evidence=f"{name} is not installed in {probe.get('executable') or py}{why}",
                    fix=f"{py} -m pip install {dist}" if needed else None,
                )
            )
            continue
        if "undefined symbol" in err:
            torch_v = (pk.get("torch") or {}).get("version") or "the installed torch"
            fix = (
                f"{name} was built against another torch: install the {dist} build made for torch {torch_v} "
                f"(or rebuild it from source with MAX_JOBS=2), so {name} and torch match"
            )
        elif re.search(r"lib(cudart|nvrtc|cublas)[\w.-]*\.so\.(\d+)", err):
            m = re.search(r"(lib\w+[\w.-]*\.so\.[\d.]+)", err)
            lib = m.group(1) if m else "a CUDA library"
            fix = (
                f"{lib} is not reachable: install one consistent CUDA set (torch and {dist} for the same CUDA "
                "major) and point LD_LIBRARY_PATH at site-packages/nvidia/cu13/lib (or cu12) in the profile's [env]"
            )
        else:
            fix = (
                f"reinstall {dist} into {py}; run `{py} -c 'import {name}'` on the host to see the full error"
            )
        out.append(
            Finding(check=name, status="fail", evidence=f"import {name} failed: {_tail(err)}", fix=fix)
        )
    return out


def _cuda_findings(probe: dict[str, Any], smi: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    torch = (probe.get("packages") or {}).get("torch") or {}
    torch_cuda = _major_minor(torch.get("cuda"))
    driver_cuda = _major_minor(smi.get("driver_cuda"))
    if torch_cuda and driver_cuda:
        ev = f"torch built for CUDA {torch['cuda']}; driver supports CUDA {smi['driver_cuda']}"
        if torch_cuda[0] > driver_cuda[0]:
            out.append(
                Finding(
                    check="cuda-driver",
                    status="fail",
                    evidence=ev,
                    fix=f"upgrade the NVIDIA driver to one for CUDA ≥ {torch['cuda']}, or install the torch build "
                    f"for CUDA {driver_cuda[0]}.x (e.g. cu{driver_cuda[0]}{min(driver_cuda[1], 8)})",
                )
            )
        elif torch_cuda > driver_cuda:
            out.append(
                Finding(
                    check="cuda-driver",
                    status="warn",
                    evidence=ev + " (minor-version compatibility only; PTX JIT may fail)",
                    fix="a driver for the same CUDA minor avoids surprises with JIT kernels",
                )
            )
        else:
            out.append(Finding(check="cuda-driver", status="ok", evidence=ev))
    # CUDA runtimes: loaded in the probe process (strong), reachable through LD_LIBRARY_PATH (weak)
    loaded = probe.get("loaded_libs") or []
    loaded_majors = sorted({int(m.group(1)) for p in loaded if (m := re.search(r"libcudart\.so\.(\d+)", p))})
    libs = probe.get("libs") or {}
    ld_entries = libs.get("ld_library_path") or []
    ld_majors = sorted({m for e in ld_entries for m in e.get("cudart_majors") or []})
    wheel_majors = sorted({w["major"] for w in libs.get("wheels") or [] if w.get("major")})
    ev = (
        f"libcudart loaded after the imports: {', '.join(f'.so.{m}' for m in loaded_majors) or 'none'}; "
        f"in LD_LIBRARY_PATH: {', '.join(f'.so.{m}' for m in ld_majors) or 'none'}; "
        f"in nvidia wheels: {', '.join(f'.so.{m}' for m in wheel_majors) or 'none'}"
    )
    fix_two = (
        "use one consistent set: torch, sglang-kernel and flashinfer built for the same CUDA major, and "
        "LD_LIBRARY_PATH (profile [env]) pointing only at that major's libraries (site-packages/nvidia/cu13/lib "
        "for cu13)"
    )
    if len(loaded_majors) > 1:
        out.append(Finding(check="cuda-runtimes", status="fail", evidence=ev, fix=fix_two))
    elif len(ld_majors) > 1:
        out.append(Finding(check="cuda-runtimes", status="warn", evidence=ev, fix=fix_two))
    elif torch_cuda and ld_majors and ld_majors[0] != torch_cuda[0]:
        out.append(
            Finding(
                check="cuda-runtimes",
                status="warn",
                evidence=ev + f"; torch is built for CUDA {torch_cuda[0]}",
                fix=fix_two,
            )
        )
    elif loaded or ld_entries or wheel_majors:
        out.append(Finding(check="cuda-runtimes", status="ok", evidence=ev))
    missing_dirs = [e["dir"] for e in ld_entries if not e.get("exists")]
    if missing_dirs:
        out.append(
            Finding(
                check="ld-library-path",
                status="warn",
                evidence=f"LD_LIBRARY_PATH entries that do not exist: {', '.join(missing_dirs)}",
                fix="fix or remove them in the profile's [env] LD_LIBRARY_PATH",
            )
        )
    return out


def _service_gpus(svc: ServiceSpec, gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    idx = svc.gpus or ([0] if gpus else [])
    return [g for g in gpus if g["index"] in idx]


def _our_pids(probe: dict[str, Any]) -> dict[int, str]:
    return {
        p["pidfile_pid"]: p["name"]
        for p in probe.get("ports") or []
        if p.get("pidfile_pid") and p.get("pidfile_alive")
    }


def _gpu_findings(profile: HostProfile, probe: dict[str, Any], smi: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    if "error" in smi:
        if smi.get("missing"):
            ev, fix = (
                "nvidia-smi is not installed or not on the PATH",
                "install the NVIDIA driver (nvidia-smi comes with it)",
            )
        else:
            ev, fix = (
                f"nvidia-smi failed: {smi['error']}",
                "check the driver: `nvidia-smi` on the host, dmesg for Xid",
            )
        needs = any(s.launcher == "sglang" for s in profile.service)
        out.append(Finding(check="nvidia-smi", status="fail" if needs else "warn", evidence=ev, fix=fix))
        return out
    gpus: list[dict[str, Any]] = smi.get("gpus") or []
    lost = {int(k): v for k, v in (smi.get("lost") or {}).items()}
    for line in smi.get("handle_errors") or []:
        out.append(
            Finding(
                check="gpu-lost",
                status="fail" if any(s.launcher == "sglang" for s in profile.service) else "warn",
                evidence=f"nvidia-smi: {line}",
                fix="the GPU fell off the bus: check dmesg for Xid 79, reset it (nvidia-smi -r) or reboot",
            )
        )
    for idx, what in sorted(lost.items()):
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
    if not gpus and (lost or smi.get("handle_errors")):
        return out
    if not gpus:
        out.append(
            Finding(
                check="gpus",
                status="fail",
                evidence=f"nvidia-smi reports no GPU ({smi.get('raw_error') or 'empty output'})",
                fix="check the driver and that the GPUs are visible (No devices were found?)",
            )
        )
        return out
    names = sorted({g.get("name") or "?" for g in gpus})
    drivers = sorted({g.get("driver_version") or "?" for g in gpus})
    caps = sorted({g.get("compute_cap") or "?" for g in gpus})
    out.append(
        Finding(
            check="gpus",
            status="ok",
            evidence=f"{len(gpus)} GPU(s): {', '.join(names)}; compute capability {', '.join(caps)}; "
            f"driver {', '.join(drivers)}, CUDA {smi.get('driver_cuda') or '?'}",
        )
    )
    by_index = {g["index"]: g for g in gpus}
    ours = _our_pids(probe)
    apps = smi.get("apps") or []
    nvcc = probe.get("nvcc") or {}
    nvcc_v = _major_minor(nvcc.get("version"))
    for s in profile.service:
        if s.launcher != "sglang":
            continue
        missing = [i for i in s.gpus if i not in by_index]
        if missing:
            out.append(
                Finding(
                    check=f"gpus:{s.name}",
                    status="fail",
                    evidence=f"service {s.name} asks for GPU(s) {missing}; the host has {sorted(by_index)}",
                    fix=f"set gpus in [[service]] {s.name} to existing indices",
                )
            )
        mine = _service_gpus(s, gpus)
        # free memory vs mem_fraction_static
        frac = s.mem_fraction_static
        for g in mine:
            total, used = g.get("mem_total_mb"), g.get("mem_used_mb")
            if total is None or used is None:
                continue
            free = total - used
            need_frac = frac if frac is not None else DEFAULT_MEM_FRACTION
            need = int(total * need_frac)
            holders = [a for a in apps if a.get("gpu_uuid") and a["gpu_uuid"] == g.get("uuid")]
            own = [a for a in holders if a["pid"] in ours and ours[a["pid"]] == s.name]
            ev = (
                f"GPU {g['index']}: {free} MiB free of {total}; mem_fraction_static "
                f"{frac if frac is not None else f'unset (~{DEFAULT_MEM_FRACTION})'} needs ~{need} MiB"
            )
            if free >= need or own:
                out.append(
                    Finding(
                        check=f"gpu-memory:{s.name}",
                        status="ok",
                        evidence=ev + (" (used by this service itself)" if own and free < need else ""),
                    )
                )
            else:
                out.append(
                    Finding(
                        check=f"gpu-memory:{s.name}",
                        status="fail" if frac is not None else "warn",
                        evidence=ev,
                        fix=f"free GPU {g['index']} (see gpu-processes), pick another GPU, or lower "
                        f"mem_fraction_static to ≤ {max(0.05, round(free / total - 0.02, 2)):.2f}",
                    )
                )
            others = [a for a in holders if a["pid"] not in ours]
            if others:
                who = ", ".join(f"pid {a['pid']} {a['name']} ({a['used_mb']} MiB)" for a in others)
                out.append(
                    Finding(
                        check=f"gpu-processes:{s.name}",
                        status="warn",
                        evidence=f"GPU {g['index']} already runs: {who}",
                        fix="stop them or choose another GPU for this service",
                    )
                )
        # Blackwell SM120 traps
        sm12 = [g for g in mine if (g.get("compute_cap") or "").startswith("12.")]
        if sm12:
            backends = {b for b in (s.attention_backend, s.draft_attention_backend) if b}
            idx = [g["index"] for g in sm12]
            if "trtllm_mha" in backends:
                out.append(
                    Finding(
                        check=f"sm120:{s.name}",
                        status="fail",
                        evidence=f"service {s.name} asks for trtllm_mha on SM120 GPU(s) {idx}; trtllm_mha is SM100-only",
                        fix='set attention_backend = "triton" (--attention-backend triton)',
                    )
                )
            if "flashinfer" in backends and (nvcc_v is None or nvcc_v < (12, 9)):
                out.append(
                    Finding(
                        check=f"sm120:{s.name}",
                        status="warn",
                        evidence=f"flashinfer on SM120 GPU(s) {idx} JIT-compiles with nvcc ≥ 12.9; nvcc is "
                        f"{nvcc.get('version') or 'not found'}",
                        fix='set attention_backend = "triton" (--attention-backend triton), or install CUDA ≥ 12.9',
                    )
                )
    return out


def _service_findings(profile: HostProfile, probe: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    paths: dict[str, bool] = probe.get("paths") or {}
    models: dict[str, Any] = probe.get("models") or {}
    ports = {p["name"]: p for p in probe.get("ports") or []}
    for s in profile.service:
        # ports
        p = ports.get(s.name)
        if p is not None and s.launcher == "external":
            # a server we did not start: its port must be in use, by it
            out.append(
                Finding(
                    check=f"port:{s.name}",
                    status="warn" if p.get("free") else "ok",
                    evidence=f"{s.bind}:{s.port} is "
                    + ("free: the external server is not running" if p.get("free") else "in use (external)"),
                )
            )
            p = None
        if p is not None:
            if p.get("free"):
                out.append(
                    Finding(check=f"port:{s.name}", status="ok", evidence=f"{s.bind}:{s.port} is free")
                )
            else:
                holder = p.get("holder") or {}
                hp = holder.get("pid")
                same_group = p.get("pidfile_pgid") is not None and holder.get("pgid") == p.get("pidfile_pgid")
                own = p.get("pidfile_alive") and (hp is None or hp == p.get("pidfile_pid") or same_group)
                who = f"pid {hp} ({holder.get('name')})" if hp else "another process"
                if own:
                    out.append(
                        Finding(
                            check=f"port:{s.name}",
                            status="ok",
                            evidence=f"{s.bind}:{s.port} is held by our service {s.name} (pid {p['pidfile_pid']})",
                        )
                    )
                else:
                    out.append(
                        Finding(
                            check=f"port:{s.name}",
                            status="fail",
                            evidence=f"{s.bind}:{s.port} is in use by {who}: {p.get('error') or 'bind failed'}",
                            fix=f"stop that process or give service {s.name} another port",
                        )
                    )
        if s.launcher != "sglang":
            continue
        # model and draft paths
        for what, path in (("model", s.model), ("draft_model", s.draft_model)):
            if not path:
                continue
            if paths.get(path):
                cfg = models.get(path) or {}
                note = "" if what != "model" or cfg.get("has_config") else " (no config.json in it)"
                out.append(
                    Finding(
                        check=f"{what}:{s.name}",
                        status="ok" if not note else "warn",
                        evidence=f"{path} exists{note}",
                        fix=None if not note else "point model at the directory holding config.json",
                    )
                )
            else:
                out.append(
                    Finding(
                        check=f"{what}:{s.name}",
                        status="fail",
                        evidence=f"{path} does not exist on {profile.name}",
                        fix=f"download it there or fix {what} in [[service]] {s.name}",
                    )
                )
        # hybrid models with speculative decoding
        why = _is_hybrid(models.get(s.model or ""))
        if why and s.algorithm in ("dflash", "ddtree"):
            strategy = s.mamba_radix_cache_strategy or s.mamba_scheduler_strategy
            for flag in ("--mamba-radix-cache-strategy", "--mamba-scheduler-strategy"):
                if flag in s.extra_args:
                    i = s.extra_args.index(flag)
                    strategy = s.extra_args[i + 1] if i + 1 < len(s.extra_args) else strategy
            ev = f"target {s.model} is hybrid ({why}) and {s.name} uses speculative decoding ({s.algorithm})"
            # "auto" picks extra_buffer only with the overlap scheduler or paging (0.5.23 arg_groups/
            # overrides.py), and speculative decoding turns the overlap scheduler off: say it explicitly
            if strategy not in ("extra_buffer", "extra_buffer_lazy"):
                out.append(
                    Finding(
                        check=f"hybrid:{s.name}",
                        status="fail",
                        evidence=f"{ev}; mamba_radix_cache_strategy is {strategy or 'unset (auto)'}",
                        fix=f'in [[service]] {s.name}: mamba_radix_cache_strategy = "extra_buffer"',
                    )
                )
            else:
                out.append(
                    Finding(check=f"hybrid:{s.name}", status="ok", evidence=f"{ev}; {strategy} is set")
                )
            if s.algorithm == "ddtree" and s.mode == "tree":
                flag = profile.ddtree_flags.allow_hybrid_unsafe or "[ddtree_flags] allow_hybrid_unsafe"
                if s.allow_hybrid_unsafe:
                    out.append(
                        Finding(
                            check=f"hybrid-tree:{s.name}",
                            status="warn",
                            evidence=f"DDTree tree mode on a hybrid target, allowed explicitly ({flag}): tree "
                            "verification of linear-attention/Mamba state is not exact",
                            fix='use mode = "shadow-linear" for trusted numbers',
                        )
                    )
                else:
                    out.append(
                        Finding(
                            check=f"hybrid-tree:{s.name}",
                            status="fail",
                            evidence=f"DDTree tree mode on a hybrid target needs the explicit switch {flag}",
                            fix=f'set allow_hybrid_unsafe = true in [[service]] {s.name} (knowing it is unsafe), or mode = "shadow-linear"',
                        )
                    )
    return out


def _host_findings(probe: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    wd = probe.get("workdir") or {}
    if wd:
        if wd.get("trust"):
            out.append(
                Finding(
                    check="workdir",
                    status="fail",
                    evidence=str(wd["trust"]),
                    fix="launch, kill and status refuse this workdir until it is fixed",
                )
            )
        elif wd.get("writable"):
            note = "" if wd.get("exists") else f" (will be created under {wd.get('existing')})"
            out.append(Finding(check="workdir", status="ok", evidence=f"{wd['path']} is writable{note}"))
        else:
            out.append(
                Finding(
                    check="workdir",
                    status="fail",
                    evidence=f"{wd['path']} is not writable{': ' + wd['error'] if wd.get('error') else ''}",
                    fix="choose a writable workdir in the profile, or fix its permissions",
                )
            )
        free = wd.get("free_mb")
        if free is not None:
            ev = f"{free} MiB free on the filesystem of {wd.get('existing')}"
            if free < DISK_FAIL_MB:
                out.append(Finding(check="disk", status="fail", evidence=ev, fix="free disk space for logs"))
            elif free < DISK_WARN_MB:
                out.append(
                    Finding(check="disk", status="warn", evidence=ev, fix="logs of a long run need space")
                )
            else:
                out.append(Finding(check="disk", status="ok", evidence=ev))
    return out


async def _launch_line_findings(t: Transport, profile: HostProfile) -> list[Finding]:
    """Each sglang service's exact launch line through the host's own parser, and what DDTree flags the
    host's build has (from the same parser)."""
    from ddtree_tui.services import argcheck
    from ddtree_tui.services.launchline import build_launch

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
        if res.ok:
            out.append(Finding(check=f"launch-line:{s.name}", status="ok", evidence=res.summary()))
        elif res.ok is None:
            out.append(
                Finding(
                    check=f"launch-line:{s.name}",
                    status="warn",
                    evidence=res.summary(),
                    fix=f"run `{profile.python} -c 'import sglang.srt.server_args'` on the host to see why",
                )
            )
        else:
            out.append(
                Finding(
                    check=f"launch-line:{s.name}",
                    status="fail",
                    evidence=res.summary(),
                    fix=f"fix [[service]] {s.name} or [ddtree_flags] in {profile.source or 'the profile'} "
                    "(hostprofiles/README.md); a launch is refused until then unless forced",
                )
            )
    if build is not None:
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
        uses_ddtree = any(s.algorithm == "ddtree" for s in svcs)
        status: FindingStatus = "ok"
        if uses_ddtree and (not build.ddtree_flags or has_algo is False):
            status = "fail"
        out.append(
            Finding(
                check="ddtree-build",
                status=status,
                evidence=f"SGLang {build.version or '?'}: " + "; ".join(bits),
                fix=None
                if status == "ok"
                else "this build has no DDTree: install the patched build, or set [ddtree_flags] to its "
                "spelling (hostprofiles/README.md)",
            )
        )
    return out


async def _probe(
    t: Transport, profile: HostProfile, python: str, packages: bool
) -> tuple[dict[str, Any] | None, str]:
    req = json.dumps(_probe_request(profile, packages))
    res = await _run(t, [python, "-c", PROBE], input=req, env=profile.env or None, timeout=PROBE_TIMEOUT)
    data = _parse_probe(res)
    if data is not None:
        return data, ""
    if res.timed_out:
        return None, f"the probe did not finish in {PROBE_TIMEOUT:.0f} s"
    return None, _tail(res.stderr or res.stdout) or f"exit status {res.exit_status}"


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
    (probe, perr), smi = await asyncio.gather(
        _probe(transport, profile, profile.python, True), _smi(transport, profile.env or None)
    )
    findings: list[Finding] = []
    if probe is None:
        findings.append(
            Finding(
                check="python",
                status="fail",
                evidence=f"{profile.python} could not run the probe: {perr}",
                fix="set python in the profile to the interpreter of the SGLang environment",
            )
        )
        # the host-side checks (paths, ports, workdir) still need some Python: try the system one
        if profile.python != "python3":
            probe, _ = await _probe(transport, profile, "python3", False)
    else:
        findings.append(
            Finding(
                check="python",
                status="ok",
                evidence=f"Python {probe.get('python')} at {probe.get('executable')}",
            )
        )
    if probe is not None:
        findings += _pkg_findings(profile, probe)
        findings += _cuda_findings(probe, smi)
    findings += _gpu_findings(profile, probe or {}, smi)
    if probe is not None:
        findings += _service_findings(profile, probe)
        findings += _host_findings(probe)
        if (probe.get("packages") or {}).get("sglang", {}).get("ok"):
            findings += await _launch_line_findings(transport, profile)
    else:
        findings.append(
            Finding(
                check="host-checks",
                status="warn",
                evidence="paths, ports, workdir and disk were not checked: no Python ran on the host",
                fix="install python3 on the host",
            )
        )
    report.findings = findings
    report.facts = {"probe": probe, "nvidia_smi": smi}
    return report


# --- output ---------------------------------------------------------------------------------------------

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


UNNEEDED = " (no service of this profile needs it)"


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


async def _doctor_hosts(profiles: Sequence[HostProfile]) -> list[DoctorReport]:
    from ddtree_tui.transport import make_transport

    async def one(p: HostProfile) -> DoctorReport:
        try:
            t = make_transport(p)
        except Exception as e:
            return DoctorReport(
                host=p.name,
                address=p.address,
                findings=[Finding(check="connection", status="fail", evidence=f"no transport: {e}")],
            )
        try:
            return await run_doctor(t, p)
        except Exception as e:  # a bug in one check must not hide the other hosts
            return DoctorReport(
                host=p.name,
                address=p.address,
                findings=[Finding(check="doctor", status="fail", evidence=f"{type(e).__name__}: {e}")],
            )
        finally:
            try:
                await t.close()
            except Exception:
                pass

    return list(await asyncio.gather(*(one(p) for p in profiles)))


def cli_main(ns: Any) -> int:
    """`ddtree-tui doctor [HOST] [--json]`: 0 all ok/warn, 1 any fail, 2 bad usage."""
    from ddtree_tui.config import ProfileError, resolve_profiles

    try:
        profiles = resolve_profiles(ns.profile, ns.profiles, getattr(ns, "demo", False))
    except ProfileError as e:
        print(f"ddtree-tui: {e}", file=sys.stderr)
        return 2
    host = getattr(ns, "host", None)
    if host:
        sel = [p for p in profiles if p.name == host]
        if not sel:
            known = ", ".join(p.name for p in profiles) or "none"
            print(f"ddtree-tui doctor: no host '{host}' (known: {known})", file=sys.stderr)
            return 2
        profiles = sel
    if not profiles:
        print("ddtree-tui doctor: no host profiles (use --profile FILE or ./hostprofiles/)", file=sys.stderr)
        return 2
    reports = asyncio.run(_doctor_hosts(profiles))
    if getattr(ns, "json", False):
        print(json.dumps({"schema": 1, "hosts": [r.model_dump(mode="json") for r in reports]}, indent=2))
    else:
        print("\n\n".join(render(r) for r in reports))
    return 1 if any(r.worst == "fail" for r in reports) else 0

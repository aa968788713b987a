"""The Python environment's checks: the packages SGLang needs (version, import errors and their fixes), torch's
CUDA build against the driver, and which CUDA runtimes the imports load or LD_LIBRARY_PATH reaches."""

from __future__ import annotations

import re

from ddtree_tui.config import HostProfile
from ddtree_tui.doctor.facts import PackageInfo, ProbeReply, SmiFacts, SmiFailed
from ddtree_tui.doctor.model import Finding, FindingStatus, major_minor, needs_gpu, tail

PACKAGES = ("torch", "sglang", "sgl_kernel", "flashinfer", "triton", "transformers")
SGLANG_NEEDS = ("torch", "sglang", "sgl_kernel", "triton", "transformers")
# the kernels' distribution is sglang-kernel since 0.5.x (0.5.23 pins sglang-kernel==0.4.10; the old
# sgl-kernel stopped at 0.3.21); the import name is still sgl_kernel
DISTRIBUTION = {"sgl_kernel": "sglang-kernel", "flashinfer": "flashinfer-python"}
UNNEEDED = " (no service of this profile needs it)"


def _torch_evidence(info: PackageInfo) -> str:
    ev = f"torch {info.version or '?'} (CUDA build {info.cuda or 'none: CPU-only build'})"
    if info.cuda_error:
        return ev + f"; CUDA error: {tail(info.cuda_error, 200)}"
    if info.cuda_available:
        caps = ", ".join(f"{a}.{b}" for a, b in info.capabilities)
        return ev + f", CUDA available, {info.device_count} device(s), capability {caps or '?'}"
    return ev + ", CUDA not available"


def _torch_fix(info: PackageInfo, py: str) -> str | None:
    """Why an importable torch still cannot serve (None: it can)."""
    if not info.cuda:
        return f"install a CUDA build of torch into {py} (e.g. the cu128 or cu130 wheel index)"
    if not info.cuda_available:
        return "torch cannot use the GPU: compare its CUDA build with the driver (see cuda-driver)"
    return None


def _import_fix(name: str, err: str, py: str, pk: dict[str, PackageInfo]) -> str:
    dist = DISTRIBUTION.get(name, name)
    if "undefined symbol" in err:
        torch = pk.get("torch")
        torch_v = (torch.version if torch else None) or "the installed torch"
        return (
            f"{name} was built against another torch: install the {dist} build made for torch {torch_v} "
            f"(or rebuild it from source with MAX_JOBS=2), so {name} and torch match"
        )
    if re.search(r"lib(cudart|nvrtc|cublas)[\w.-]*\.so\.(\d+)", err):
        m = re.search(r"(lib\w+[\w.-]*\.so\.[\d.]+)", err)
        lib = m.group(1) if m else "a CUDA library"
        return (
            f"{lib} is not reachable: install one consistent CUDA set (torch and {dist} for the same CUDA "
            "major) and point LD_LIBRARY_PATH at site-packages/nvidia/cu13/lib (or cu12) in the profile's [env]"
        )
    return f"reinstall {dist} into {py}; run `{py} -c 'import {name}'` on the host to see the full error"


def pkg_findings(profile: HostProfile, probe: ProbeReply) -> list[Finding]:
    out: list[Finding] = []
    pk = probe.packages
    py = profile.python
    uses_flashinfer = any(
        "flashinfer" in (s.attention_backend or "") + (s.draft_attention_backend or "")
        for s in profile.service
        if s.launcher == "sglang"
    )
    for name in PACKAGES:
        info = pk.get(name)
        if info is None:
            continue
        if info.ok:
            if name != "torch":
                out.append(Finding(check=name, status="ok", evidence=f"{name} {info.version or '?'}"))
                continue
            fix = _torch_fix(info, py)
            out.append(
                Finding(check=name, status="fail" if fix else "ok", evidence=_torch_evidence(info), fix=fix)
            )
            continue
        if info.missing:
            needed = (name in SGLANG_NEEDS and needs_gpu(profile)) or (
                name == "flashinfer" and uses_flashinfer
            )
            out.append(
                Finding(
                    check=name,
                    status="fail" if needed else "warn",
                    evidence=f"{name} is not installed in {probe.executable or py}{'' if needed else UNNEEDED}",
                    fix=f"{py} -m pip install {DISTRIBUTION.get(name, name)}" if needed else None,
                )
            )
            continue
        err = info.error or "import failed"
        out.append(
            Finding(
                check=name,
                status="fail",
                evidence=f"import {name} failed: {tail(err)}",
                fix=_import_fix(name, err, py, pk),
            )
        )
    return out


def _driver_finding(torch_build: str | None, driver: str | None) -> Finding | None:
    """torch's CUDA build (`torch_build`) against the driver's CUDA version (`driver`)."""
    torch_cuda = major_minor(torch_build)
    driver_cuda = major_minor(driver)
    if not (torch_cuda and driver_cuda):
        return None
    ev = f"torch built for CUDA {torch_build}; driver supports CUDA {driver}"
    if torch_cuda[0] > driver_cuda[0]:
        return Finding(
            check="cuda-driver",
            status="fail",
            evidence=ev,
            fix=f"upgrade the NVIDIA driver to one for CUDA ≥ {torch_build}, or install the torch build "
            f"for CUDA {driver_cuda[0]}.x (e.g. cu{driver_cuda[0]}{min(driver_cuda[1], 8)})",
        )
    if torch_cuda > driver_cuda:
        return Finding(
            check="cuda-driver",
            status="warn",
            evidence=ev + " (minor-version compatibility only; PTX JIT may fail)",
            fix="a driver for the same CUDA minor avoids surprises with JIT kernels",
        )
    return Finding(check="cuda-driver", status="ok", evidence=ev)


FIX_TWO_RUNTIMES = (
    "use one consistent set: torch, sglang-kernel and flashinfer built for the same CUDA major, and "
    "LD_LIBRARY_PATH (profile [env]) pointing only at that major's libraries (site-packages/nvidia/cu13/lib "
    "for cu13)"
)


def cuda_findings(probe: ProbeReply, smi: SmiFacts | SmiFailed) -> list[Finding]:
    torch = probe.packages.get("torch")
    torch_build = torch.cuda if torch else None
    driver = _driver_finding(torch_build, smi.driver_cuda if isinstance(smi, SmiFacts) else None)
    out: list[Finding] = [driver] if driver else []
    torch_cuda = major_minor(torch_build)
    # CUDA runtimes: loaded in the probe process (strong), reachable through LD_LIBRARY_PATH (weak)
    loaded = probe.loaded_libs or []
    loaded_majors = sorted({int(m.group(1)) for p in loaded if (m := re.search(r"libcudart\.so\.(\d+)", p))})
    ld_entries = probe.libs.ld_library_path if probe.libs else []
    ld_majors = sorted({m for e in ld_entries for m in e.cudart_majors})
    wheel_majors = sorted({w.major for w in (probe.libs.wheels if probe.libs else []) if w.major})
    ev = (
        f"libcudart loaded after the imports: {', '.join(f'.so.{m}' for m in loaded_majors) or 'none'}; "
        f"in LD_LIBRARY_PATH: {', '.join(f'.so.{m}' for m in ld_majors) or 'none'}; "
        f"in nvidia wheels: {', '.join(f'.so.{m}' for m in wheel_majors) or 'none'}"
    )
    # the first case that holds decides (status, evidence suffix, fix)
    cases: list[tuple[bool, FindingStatus, str, str | None]] = [
        (len(loaded_majors) > 1, "fail", "", FIX_TWO_RUNTIMES),
        (len(ld_majors) > 1, "warn", "", FIX_TWO_RUNTIMES),
        (
            bool(torch_cuda and ld_majors and ld_majors[0] != torch_cuda[0]),
            "warn",
            f"; torch is built for CUDA {torch_cuda[0] if torch_cuda else '?'}",
            FIX_TWO_RUNTIMES,
        ),
        (bool(loaded or ld_entries or wheel_majors), "ok", "", None),
    ]
    for hit, status, more, fix in cases:
        if hit:
            out.append(Finding(check="cuda-runtimes", status=status, evidence=ev + more, fix=fix))
            break
    missing_dirs = [e.dir for e in ld_entries if not e.exists]
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

"""The doctor against fake host environments on this machine (LocalTransport): a real Python with fake
`torch`/`sglang`/... modules on PYTHONPATH, a fake nvidia-smi and nvcc replaying real output, real paths,
real sockets. Each check's ok and fail path. `FakeHost` is reused by the sshd tests."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ddtree_tui.cli import main
from ddtree_tui.config import HostProfile
from ddtree_tui.doctor import (
    MARKER,
    PACKAGES,
    PROBE,
    DoctorReport,
    Finding,
    ProbeReply,
    parse_reply,
    render,
    run_doctor,
)
from ddtree_tui.transport import make_transport
from tests.util import free_port

FIX = Path(__file__).resolve().parent.parent / "fixtures"
FAKE_SRT = FIX / "services" / "fake_sglang" / "sglang" / "srt"

TORCH = """
import mmap, os
__version__ = os.environ.get("FAKE_TORCH_VERSION", "2.9.0+cu130")
class version:
    cuda = os.environ.get("FAKE_TORCH_CUDA", "13.0") or None
class cuda:
    @staticmethod
    def is_available():
        return os.environ.get("FAKE_CUDA_AVAILABLE", "1") == "1"
    @staticmethod
    def device_count():
        return 2
    @staticmethod
    def get_device_capability(i):
        return tuple(int(x) for x in os.environ.get("FAKE_CAP", "9.0").split("."))
_maps = []
for _p in filter(None, os.environ.get("FAKE_LOAD_LIBS", "").split(":")):
    with open(_p, "rb") as _f:
        _maps.append(mmap.mmap(_f.fileno(), 0, prot=mmap.PROT_READ))
"""

SMI = """#!/bin/sh
d="$(dirname "$0")/smi"
[ -f "$d/fail" ] && { cat "$d/fail" >&2; exit 9; }
case "$*" in
  *--query-gpu*) cat "$d/gpus.csv" ;;
  *--query-compute-apps*) cat "$d/apps.csv" ;;
  *) cat "$d/table.txt" ;;
esac
"""


class FakeHost:
    """A host environment in a directory: bin/ (nvidia-smi, nvcc), py/ (fake modules), models/."""

    def __init__(self, root: Path, bin_dir: Path | None = None) -> None:
        self.root = root
        self.bin = bin_dir or root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.py = root / "py"
        self.py.mkdir(parents=True, exist_ok=True)
        self.models = root / "models"
        self.models.mkdir(exist_ok=True)
        self.workdir = root / "wd"
        self.env: dict[str, str] = {"PYTHONPATH": str(self.py), "PATH": f"{self.bin}:/usr/bin:/bin"}
        for name, ver in (("sglang", "0.5.4"), ("sgl_kernel", "0.3.16"), ("flashinfer", "0.4.1")):
            self.module(name, f"__version__ = {ver!r}\n")
        self.module("triton", "__version__ = '3.5.0'\n")
        self.module("transformers", "__version__ = '4.57.1'\n")
        self.module("torch", TORCH)
        # the host's own parser: sglang.srt.server_args of a real release's flag table (fake_sglang)
        shutil.copytree(FAKE_SRT, self.py / "sglang" / "srt")
        self.nvidia_smi()
        self.nvcc("12.8")

    def module(self, name: str, source: str | None) -> None:
        d = self.py / name
        if source is None:
            shutil.rmtree(d, ignore_errors=True)
            return
        d.mkdir(exist_ok=True)
        (d / "__init__.py").write_text(textwrap.dedent(source))

    def nvidia_smi(
        self,
        gpus: str = "query-gpu-h200.csv",
        apps: str = "query-apps.csv",
        cuda: str = "13.0",
        fail: str | None = None,
    ) -> None:
        s = self.bin / "smi"
        s.mkdir(exist_ok=True)
        (s / "gpus.csv").write_text((FIX / "doctor" / gpus).read_text())
        (s / "apps.csv").write_text((FIX / "doctor" / apps).read_text() if apps else "")
        table = (
            (FIX / "doctor" / "nvidia-smi.txt")
            .read_text()
            .replace("CUDA Version: 13.0", f"CUDA Version: {cuda}")
        )
        (s / "table.txt").write_text(table)
        if fail:
            (s / "fail").write_text(fail + "\n")
        elif (s / "fail").exists():
            (s / "fail").unlink()
        exe = self.bin / "nvidia-smi"
        exe.write_text(SMI)
        exe.chmod(0o755)

    def no_nvidia_smi(self) -> None:
        (self.bin / "nvidia-smi").unlink()

    def nvcc(self, version: str) -> None:
        exe = self.bin / "nvcc"
        exe.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {version}, V{version}.93'\n")
        exe.chmod(0o755)

    def model(self, name: str, config: dict[str, Any] | None) -> str:
        d = self.models / name
        d.mkdir(exist_ok=True)
        if config is not None:
            (d / "config.json").write_text(json.dumps(config))
        return str(d)

    def profile(
        self,
        services: list[dict[str, Any]] | None = None,
        address: str = "local",
        env: dict[str, str] | None = None,
        python: str | None = None,
        **kw: Any,
    ) -> HostProfile:
        data: dict[str, Any] = {
            "name": "fake",
            "address": address,
            "python": python or sys.executable,
            "workdir": str(self.workdir),
            "env": {**self.env, **(env or {})},
            "service": services or [],
            "connect_timeout": 10,
            **kw,
        }
        return HostProfile.model_validate(data)


def plain_cfg() -> dict[str, Any]:
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}


def hybrid_cfg() -> dict[str, Any]:
    return {
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        },
    }


def svc(fh: FakeHost, name: str = "dflash", port: int | None = None, **kw: Any) -> dict[str, Any]:
    d = {
        "name": name,
        "algorithm": "dflash",
        "model": fh.model("target", plain_cfg()),
        "draft_model": fh.model("draft", plain_cfg()),
        "port": port or free_port(),
        "gpus": [1],
        "mem_fraction_static": 0.8,
    }
    d.update(kw)
    return d


async def doctor(profile: HostProfile) -> DoctorReport:
    t = make_transport(profile)
    try:
        return await run_doctor(t, profile)
    finally:
        await t.close()


def find(report: DoctorReport, check: str) -> Finding:
    hits = [f for f in report.findings if f.check == check]
    assert hits, f"no finding {check!r} in:\n{render(report)}"
    return hits[0]


def findings(report: DoctorReport, check: str) -> list[Finding]:
    return [f for f in report.findings if f.check == check]


@pytest.fixture
def fh(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "host")


# --- packages and python ------------------------------------------------------------------------------


async def test_healthy_host_is_all_ok(fh: FakeHost) -> None:
    r = await doctor(fh.profile([svc(fh)]))
    text = render(r)
    assert r.worst == "ok", text
    assert "torch 2.9.0+cu130 (CUDA build 13.0), CUDA available, 2 device(s), capability 9.0, 9.0" in text
    for name, ver in (
        ("sglang", "0.5.4"),
        ("sgl_kernel", "0.3.16"),
        ("triton", "3.5.0"),
        ("transformers", "4.57.1"),
    ):
        assert find(r, name).evidence == f"{name} {ver}"
    assert find(r, "python").evidence.startswith(f"Python {sys.version.split()[0]}")
    assert find(r, "cuda-driver").status == "ok"
    assert (
        "2 GPU(s): NVIDIA H200; compute capability 9.0; driver 580.159.04, CUDA 13.0"
        in find(r, "gpus").evidence
    )
    assert find(r, "port:dflash").status == "ok"
    assert find(r, "model:dflash").status == "ok" and find(r, "draft_model:dflash").status == "ok"
    assert find(r, "workdir").status == "ok" and "will be created" in find(r, "workdir").evidence
    assert find(r, "disk").status == "ok"
    assert find(r, "gpu-memory:dflash").status == "ok"


async def test_missing_and_broken_imports(fh: FakeHost) -> None:
    fh.module("sglang", None)
    fh.module(
        "sgl_kernel",
        "raise ImportError('/x/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')",
    )
    fh.module(
        "flashinfer",
        "raise OSError('libcudart.so.12: cannot open shared object file: No such file or directory')",
    )
    fh.module("transformers", None)
    r = await doctor(fh.profile([svc(fh)]))
    sg = find(r, "sglang")
    assert sg.status == "fail" and "not installed" in sg.evidence and "pip install sglang" in (sg.fix or "")
    sk = find(r, "sgl_kernel")
    assert sk.status == "fail" and "undefined symbol" in sk.evidence
    assert "built against another torch" in (sk.fix or "") and "2.9.0+cu130" in (sk.fix or "")
    fi = find(r, "flashinfer")
    assert fi.status == "fail" and "libcudart.so.12" in (fi.fix or "") and "LD_LIBRARY_PATH" in (fi.fix or "")
    assert find(r, "transformers").status == "fail"
    assert r.worst == "fail"


async def test_packages_not_needed_without_sglang_services(fh: FakeHost) -> None:
    fh.module("sglang", None)
    fh.module("flashinfer", None)
    fh.module("torch", None)
    r = await doctor(fh.profile([]))
    assert find(r, "sglang").status == "warn" and find(r, "flashinfer").status == "warn"
    assert (
        find(r, "torch").status == "warn"
        and "no service of this profile needs it" in find(r, "torch").evidence
    )
    assert r.worst == "warn"


async def test_torch_cpu_build_and_no_cuda(fh: FakeHost) -> None:
    r = await doctor(fh.profile([svc(fh)], env={"FAKE_TORCH_CUDA": "", "FAKE_CUDA_AVAILABLE": "0"}))
    t = find(r, "torch")
    assert t.status == "fail" and "CPU-only" in t.evidence
    r = await doctor(fh.profile([svc(fh)], env={"FAKE_CUDA_AVAILABLE": "0"}))
    assert find(r, "torch").status == "fail" and "CUDA not available" in find(r, "torch").evidence


async def test_missing_python_is_a_finding(fh: FakeHost) -> None:
    r = await doctor(fh.profile([svc(fh)], python=str(fh.root / "no-such-python")))
    py = find(r, "python")
    assert py.status == "fail" and "no-such-python" in py.evidence
    # the host-side checks still ran with the system python3
    assert find(r, "port:dflash").status == "ok" and find(r, "workdir").status == "ok"
    assert not findings(r, "torch")


# --- CUDA consistency -----------------------------------------------------------------------------------


async def test_torch_cuda_newer_than_driver_fails(fh: FakeHost) -> None:
    fh.nvidia_smi(cuda="12.8")
    r = await doctor(fh.profile([svc(fh)]))
    f = find(r, "cuda-driver")
    assert f.status == "fail" and "torch built for CUDA 13.0; driver supports CUDA 12.8" in f.evidence
    assert "cu128" in (f.fix or "")
    fh.nvidia_smi(cuda="13.0")
    r = await doctor(fh.profile([svc(fh)], env={"FAKE_TORCH_CUDA": "12.8"}))
    assert find(r, "cuda-driver").status == "ok"


async def test_two_cuda_runtimes(fh: FakeHost) -> None:
    libs = fh.root / "libs"
    (libs / "cu12").mkdir(parents=True)
    (libs / "cu13").mkdir()
    (libs / "cu12" / "libcudart.so.12").write_bytes(b"\0" * 4096)
    (libs / "cu13" / "libcudart.so.13").write_bytes(b"\0" * 4096)
    # reachable through LD_LIBRARY_PATH only: a warning
    ld = f"{libs / 'cu12'}:{libs / 'cu13'}:{fh.root / 'gone'}"
    r = await doctor(fh.profile([svc(fh)], env={"LD_LIBRARY_PATH": ld}))
    f = find(r, "cuda-runtimes")
    assert f.status == "warn" and "in LD_LIBRARY_PATH: .so.12, .so.13" in f.evidence
    assert find(r, "ld-library-path").status == "warn" and "gone" in find(r, "ld-library-path").evidence
    # both loaded into one process: a failure
    loaded = f"{libs / 'cu12' / 'libcudart.so.12'}:{libs / 'cu13' / 'libcudart.so.13'}"
    r = await doctor(fh.profile([svc(fh)], env={"FAKE_LOAD_LIBS": loaded}))
    f = find(r, "cuda-runtimes")
    assert f.status == "fail" and "loaded after the imports: .so.12, .so.13" in f.evidence
    assert "one consistent set" in (f.fix or "")
    # one major, the torch one: ok
    r = await doctor(
        fh.profile(
            [svc(fh)],
            env={
                "LD_LIBRARY_PATH": str(libs / "cu13"),
                "FAKE_LOAD_LIBS": str(libs / "cu13" / "libcudart.so.13"),
            },
        )
    )
    assert find(r, "cuda-runtimes").status == "ok"
    # LD_LIBRARY_PATH of another major than torch's build
    r = await doctor(fh.profile([svc(fh)], env={"LD_LIBRARY_PATH": str(libs / "cu12")}))
    assert (
        find(r, "cuda-runtimes").status == "warn"
        and "torch is built for CUDA 13" in find(r, "cuda-runtimes").evidence
    )


# --- GPUs -----------------------------------------------------------------------------------------------


async def test_nvidia_smi_missing_or_failing(fh: FakeHost) -> None:
    fh.no_nvidia_smi()
    r = await doctor(fh.profile([svc(fh)]))
    f = find(r, "nvidia-smi")
    assert f.status == "fail" and "not installed" in f.evidence
    fh.nvidia_smi(fail="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    r = await doctor(fh.profile([svc(fh)]))
    f = find(r, "nvidia-smi")
    assert f.status == "fail" and "couldn't communicate" in f.evidence
    r = await doctor(fh.profile([]))  # no GPU service: only a warning
    assert find(r, "nvidia-smi").status == "warn"


async def test_profile_gpus_memory_and_processes(fh: FakeHost) -> None:
    r = await doctor(fh.profile([svc(fh, gpus=[3])]))
    f = find(r, "gpus:dflash")
    assert f.status == "fail" and "GPU(s) [3]; the host has [0, 1]" in f.evidence
    # GPU 0 holds 21491 MiB for pid 567: 0.9 of 143771 does not fit, and the process is named
    r = await doctor(fh.profile([svc(fh, gpus=[0], mem_fraction_static=0.9)]))
    m = find(r, "gpu-memory:dflash")
    assert m.status == "fail" and "122280 MiB free of 143771" in m.evidence and "0.83" in (m.fix or "")
    p = find(r, "gpu-processes:dflash")
    assert p.status == "warn" and "pid 567 python3 (21482 MiB)" in p.evidence
    r = await doctor(fh.profile([svc(fh, gpus=[0], mem_fraction_static=0.5)]))
    assert find(r, "gpu-memory:dflash").status == "ok"
    r = await doctor(fh.profile([svc(fh, gpus=[1], mem_fraction_static=0.95)]))
    assert find(r, "gpu-memory:dflash").status == "ok" and not findings(r, "gpu-processes:dflash")


async def test_sm120_backends(fh: FakeHost) -> None:
    fh.nvidia_smi(gpus="query-gpu-sm120.csv", apps="")
    r = await doctor(fh.profile([svc(fh, gpus=[0], attention_backend="trtllm_mha", mem_fraction_static=0.7)]))
    f = find(r, "sm120:dflash")
    assert f.status == "fail" and "SM100-only" in f.evidence and "--attention-backend triton" in (f.fix or "")
    r = await doctor(fh.profile([svc(fh, gpus=[0], attention_backend="flashinfer", mem_fraction_static=0.7)]))
    f = find(r, "sm120:dflash")
    assert f.status == "warn" and "nvcc is 12.8" in f.evidence
    fh.nvcc("12.9")
    r = await doctor(fh.profile([svc(fh, gpus=[0], attention_backend="flashinfer", mem_fraction_static=0.7)]))
    assert not findings(r, "sm120:dflash")
    r = await doctor(fh.profile([svc(fh, gpus=[0], attention_backend="triton", mem_fraction_static=0.7)]))
    assert not findings(r, "sm120:dflash") and r.worst == "ok", render(r)


# --- hybrid models --------------------------------------------------------------------------------------


async def test_hybrid_model_with_speculation(fh: FakeHost) -> None:
    target = fh.model("qwen36", hybrid_cfg())
    r = await doctor(fh.profile([svc(fh, model=target)]))
    f = find(r, "hybrid:dflash")
    assert f.status == "fail" and "linear_attention" in f.evidence
    # 0.5.23: the flag is --mamba-radix-cache-strategy, and SGLANG_ENABLE_SPEC_V2 is read by nothing
    assert 'mamba_radix_cache_strategy = "extra_buffer"' in (f.fix or "") and "SPEC_V2" not in (f.fix or "")
    good = {"mamba_radix_cache_strategy": "extra_buffer"}
    r = await doctor(fh.profile([svc(fh, model=target, **good)]))
    assert find(r, "hybrid:dflash").status == "ok"
    assert find(r, "launch-line:dflash").status == "ok"
    # the old key still means the same setting, and extra_args count too
    r = await doctor(fh.profile([svc(fh, model=target, mamba_scheduler_strategy="extra_buffer")]))
    assert find(r, "hybrid:dflash").status == "ok" and find(r, "launch-line:dflash").status == "ok"
    r = await doctor(
        fh.profile([svc(fh, model=target, extra_args=["--mamba-radix-cache-strategy", "extra_buffer"])])
    )
    assert find(r, "hybrid:dflash").status == "ok"
    # the stale spelling in extra_args: the host's parser says no, and names the rename
    r = await doctor(
        fh.profile([svc(fh, model=target, extra_args=["--mamba-scheduler-strategy", "extra_buffer"])])
    )
    f = find(r, "launch-line:dflash")
    assert f.status == "fail" and "it is now --mamba-radix-cache-strategy" in f.evidence
    # model_type alone marks it hybrid
    nxt = fh.model("next", {"model_type": "qwen3_next"})
    r = await doctor(fh.profile([svc(fh, model=nxt)]))
    assert find(r, "hybrid:dflash").status == "fail" and "qwen3_next" in find(r, "hybrid:dflash").evidence
    # baseline (no speculation) and plain models: no finding
    r = await doctor(fh.profile([svc(fh, model=target, algorithm="baseline", draft_model=None)]))
    assert not findings(r, "hybrid:dflash")
    r = await doctor(fh.profile([svc(fh)]))
    assert not findings(r, "hybrid:dflash")


async def test_ddtree_tree_mode_on_hybrid(fh: FakeHost) -> None:
    target = fh.model("qwen36", hybrid_cfg())
    good = {"mamba_radix_cache_strategy": "extra_buffer"}
    s = svc(fh, name="tree", model=target, algorithm="ddtree", mode="tree", **good)
    r = await doctor(fh.profile([s]))
    f = find(r, "hybrid-tree:tree")
    assert f.status == "fail" and "[ddtree_flags] allow_hybrid_unsafe" in f.evidence
    r = await doctor(fh.profile([{**s, "allow_hybrid_unsafe": True}]))
    assert find(r, "hybrid-tree:tree").status == "warn"
    r = await doctor(fh.profile([{**s, "mode": "shadow-linear"}]))
    assert not findings(r, "hybrid-tree:tree") and find(r, "hybrid:tree").status == "ok"


async def test_launch_line_and_ddtree_build(fh: FakeHost) -> None:
    """The host's own parser judges each launch line; doctor says which DDTree flags the build has."""
    dd = svc(fh, name="dd", algorithm="ddtree", mode="shadow-linear", budget=32)
    # upstream 0.5.23: no DDTREE algorithm, no --speculative-ddtree-budget, no DDTree flags at all
    r = await doctor(fh.profile([dd]))
    f = find(r, "launch-line:dd")
    assert f.status == "fail", render(r)
    assert "unknown flag --speculative-ddtree-budget" in f.evidence
    assert "Unknown speculative algorithm name: DDTREE" in f.evidence
    assert "needs [ddtree_flags] shadow_linear" in f.evidence
    b = find(r, "ddtree-build")
    assert b.status == "fail" and "DDTree flags of this build: none" in b.evidence and "unknown" in b.evidence
    # a patched build: the PR's budget flag, a private shadow switch, the algorithm, its env knobs
    fh.env.update(
        FAKE_SGLANG_DDTREE="1",
        FAKE_SGLANG_EXTRA_FLAGS="--speculative-ddtree-budget,--ddtree-shadow-linear!",
    )
    r = await doctor(fh.profile([dd], ddtree_flags={"shadow_linear": "--ddtree-shadow-linear"}))
    assert find(r, "launch-line:dd").status == "ok", render(r)
    b = find(r, "ddtree-build")
    assert b.status == "ok"
    assert (
        "--ddtree-shadow-linear, --speculative-ddtree-budget" in b.evidence and "DDTREE known" in b.evidence
    )
    assert "SGLANG_DDTREE_DEPTH_BONUS, SGLANG_DDTREE_MAX_TOPK" in b.evidence


# --- ports, paths, workdir ------------------------------------------------------------------------------


async def test_ports(fh: FakeHost) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = await doctor(fh.profile([svc(fh, port=port)]))
        f = find(r, "port:dflash")
        assert f.status == "fail" and f"pid {os.getpid()}" in f.evidence
        # our own service holds it: the pidfile names the holder
        run = fh.workdir / "run"
        run.mkdir(parents=True)
        (run / "dflash.json").write_text(json.dumps({"pid": os.getpid(), "port": port}))
        r = await doctor(fh.profile([svc(fh, port=port)]))
        f = find(r, "port:dflash")
        assert f.status == "ok" and f"held by our service dflash (pid {os.getpid()})" in f.evidence
        # the holder is another process of our service's group (sglang's children inherit the socket)
        child = await asyncio.create_subprocess_exec("sleep", "30")
        try:
            rec = {"pid": child.pid, "pgid": os.getpgrp(), "port": port}
            (run / "dflash.json").write_text(json.dumps(rec))
            r = await doctor(fh.profile([svc(fh, port=port)]))
            assert find(r, "port:dflash").status == "ok"
            (run / "dflash.json").write_text(json.dumps({**rec, "pgid": 999999}))
            r = await doctor(fh.profile([svc(fh, port=port)]))
            assert find(r, "port:dflash").status == "fail"
        finally:
            child.kill()
            await child.wait()
        # a stale pidfile does not excuse a foreign holder
        (run / "dflash.json").write_text(json.dumps({"pid": 2**22 + 12345, "port": port}))
        r = await doctor(fh.profile([svc(fh, port=port)]))
        assert find(r, "port:dflash").status == "fail"
    r = await doctor(fh.profile([svc(fh, port=port)]))
    assert find(r, "port:dflash").status == "ok"


async def test_paths_and_workdir(fh: FakeHost) -> None:
    s = svc(fh, model=str(fh.root / "nope"), draft_model=fh.model("noconfig", None))
    r = await doctor(fh.profile([s]))
    assert find(r, "model:dflash").status == "fail" and "does not exist" in find(r, "model:dflash").evidence
    d = find(r, "draft_model:dflash")
    assert d.status == "ok"
    ro = fh.root / "ro"
    ro.mkdir()
    (ro / "file").write_text("x")
    r = await doctor(fh.profile([], workdir=str(ro / "file" / "sub")))
    w = find(r, "workdir")
    assert w.status == "fail" and "not writable" in w.evidence
    fh.workdir.mkdir()
    r = await doctor(fh.profile([]))
    assert find(r, "workdir").status == "ok" and "will be created" not in find(r, "workdir").evidence


async def test_model_without_config_warns(fh: FakeHost) -> None:
    r = await doctor(fh.profile([svc(fh, model=fh.model("empty", None))]))
    assert find(r, "model:dflash").status == "warn"


# --- the probe's reply, typed ----------------------------------------------------------------------------


def test_probe_reply_model_is_exactly_what_the_probe_prints(fh: FakeHost) -> None:
    """The real probe, run here with a request that reaches every part of its reply (packages, a held port
    with our pidfile, a hybrid, a plain, a config-less and a missing model, LD_LIBRARY_PATH, nvcc): the
    reply parses as ProbeReply and dumps back to the very same JSON (no key missing, none added)."""
    libs = fh.root / "libs"
    libs.mkdir()
    (libs / "libcudart.so.13").write_bytes(b"\0" * 4096)
    models = [
        fh.model("hybrid", hybrid_cfg()),
        fh.model("plain", plain_cfg()),
        fh.model("bare", None),
        str(fh.root / "nope"),
    ]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        (fh.workdir / "run").mkdir(parents=True)
        (fh.workdir / "run" / "held.json").write_text(json.dumps({"pid": os.getpid(), "pgid": os.getpgrp()}))
        req = {
            "packages": list(PACKAGES),
            "workdir": str(fh.workdir),
            "paths": models,
            "models": models,
            "services": [
                {"name": "held", "port": port, "bind": "127.0.0.1"},
                {"name": "free", "port": free_port(), "bind": "127.0.0.1"},
            ],
        }
        env = {**os.environ, **fh.env, "LD_LIBRARY_PATH": f"{libs}:{fh.root / 'gone'}"}
        res = subprocess.run(
            [sys.executable, "-c", PROBE], input=json.dumps(req), capture_output=True, text=True, env=env,
            timeout=120, check=True,
        )  # fmt: skip
    line = next(ln for ln in reversed(res.stdout.splitlines()) if ln.startswith(MARKER))
    raw = json.loads(line[len(MARKER) :])
    reply = parse_reply(raw)
    assert isinstance(reply, ProbeReply), reply
    assert reply.as_json() == raw
    assert reply.packages["torch"].capabilities == [(9, 0), (9, 0)]
    held_port = next(p for p in reply.ports or [] if p.name == "held")
    assert not held_port.free and held_port.pidfile_alive and held_port.pidfile_pid == os.getpid()
    hybrid = reply.models[models[0]]
    assert (
        hybrid is not None
        and "linear_attention" in hybrid.layer_kinds
        and reply.models[models[3]] is not None
    )
    # a request without packages: neither packages nor loaded_libs in the reply, and none in the dump
    res = subprocess.run(
        [sys.executable, "-c", PROBE], input=json.dumps({**req, "packages": []}), capture_output=True,
        text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    raw = json.loads(
        next(ln for ln in reversed(res.stdout.splitlines()) if ln.startswith(MARKER))[len(MARKER) :]
    )
    reply = parse_reply(raw)
    assert isinstance(reply, ProbeReply) and reply.as_json() == raw and "packages" not in raw


def _fake_python(fh: FakeHost, reply_line: str) -> str:
    """A 'python' on the host that answers the probe with `reply_line` (after the marker)."""
    exe = fh.root / "odd-python"
    exe.write_text(f"#!/bin/sh\ncat >/dev/null\necho 'noise'\necho '{MARKER}{reply_line}'\n")
    exe.chmod(0o755)
    return str(exe)


async def test_malformed_probe_reply_is_a_finding(fh: FakeHost) -> None:
    """A reply that does not match the probe's shape, or is not JSON, is the python check's failure naming
    the field; nothing raises, and the host-side checks still run with the system python3."""
    bad = {"probe": 1, "python": "3.12.3", "executable": "/x", "packages": {"torch": {"ok": "perhaps"}}}
    r = await doctor(fh.profile([svc(fh)], python=_fake_python(fh, json.dumps(bad))))
    py = find(r, "python")
    assert py.status == "fail" and "packages.torch.ok" in py.evidence, render(r)
    assert "does not match remote/probe.py's shape" in py.evidence
    assert find(r, "workdir").status == "ok" and find(r, "port:dflash").status == "ok"
    assert not findings(r, "doctor")
    r = await doctor(fh.profile([svc(fh)], python=_fake_python(fh, '{"probe": 1, "pyth')))
    py = find(r, "python")
    assert py.status == "fail" and "not JSON" in py.evidence, render(r)
    r = await doctor(
        fh.profile([svc(fh)], python=_fake_python(fh, json.dumps({**bad, "packages": {}, "new": 1})))
    )
    assert "new: Extra inputs are not permitted" in find(r, "python").evidence


# --- CLI ------------------------------------------------------------------------------------------------


def _write_profile(path: Path, p: HostProfile) -> None:
    def toml_val(v: Any) -> str:
        return json.dumps(v)

    lines = [
        f"{k} = {toml_val(v)}"
        for k, v in p.model_dump(
            exclude={"env", "service", "ddtree_flags", "telemetry", "alerts", "source"}, exclude_none=True
        ).items()
    ]
    lines.append("[env]")
    lines += [f"{k} = {toml_val(v)}" for k, v in p.env.items()]
    for s in p.service:
        lines.append("[[service]]")
        for k, v in s.model_dump(exclude={"sim", "env"}, exclude_none=True).items():
            lines.append(f"{k} = {toml_val(v)}")
    path.write_text("\n".join(lines) + "\n")


def test_cli_text_json_and_exit_codes(
    fh: FakeHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prof = tmp_path / "fake.toml"
    _write_profile(prof, fh.profile([svc(fh)]))
    assert main(["doctor", "--profile", str(prof)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("doctor fake (local): ") and "0 fail" in out
    assert main(["doctor", "fake", "--json", "--profile", str(prof)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["hosts"][0]["host"] == "fake" and data["hosts"][0]["findings"][0]["check"] == "python"
    assert main(["doctor", "other", "--profile", str(prof)]) == 2
    assert "no host 'other'" in capsys.readouterr().err
    fh.module("torch", None)
    assert main(["doctor", "--profile", str(prof)]) == 1
    assert "FAIL  torch" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nbogus = 1\n')
    assert main(["doctor", "--profile", str(bad)]) == 2

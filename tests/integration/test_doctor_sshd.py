"""The doctor through the real test sshd: the same fake host environments, reached over ssh."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from ddtree_tui.cli import main
from tests.integration.test_doctor_local import FakeHost, doctor, find, findings, hybrid_cfg, render, svc
from tests.sshd import SshdServer, SshEnv

pytestmark = pytest.mark.sshd


async def test_doctor_over_ssh_ok_and_fail_paths(sshd: SshdServer, tmp_path: Path) -> None:
    fh = FakeHost(tmp_path / "remote", bin_dir=sshd.bin_dir)
    good = svc(fh, name="ok")
    r = await doctor(fh.profile([good], address="testhost"))
    assert r.worst == "ok", render(r)
    assert find(r, "gpus").evidence.startswith("2 GPU(s): NVIDIA H200")
    assert find(r, "torch").evidence.startswith("torch 2.9.0+cu130 (CUDA build 13.0), CUDA available")

    fh.module(
        "sgl_kernel", "raise ImportError('common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')"
    )
    fh.nvidia_smi(cuda="12.8")
    target = fh.model("hybrid", hybrid_cfg())
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        bad = svc(
            fh,
            name="bad",
            port=busy.getsockname()[1],
            model=target,
            draft_model=str(tmp_path / "remote" / "missing-draft"),
            gpus=[0, 5],
        )
        r = await doctor(fh.profile([bad], address="testhost"))
    text = render(r)
    assert find(r, "sgl_kernel").status == "fail" and "built against another torch" in (
        find(r, "sgl_kernel").fix or ""
    )
    assert find(r, "cuda-driver").status == "fail", text
    assert find(r, "port:bad").status == "fail"
    assert find(r, "draft_model:bad").status == "fail"
    assert find(r, "gpus:bad").status == "fail"
    assert find(r, "hybrid:bad").status == "fail"
    assert (
        find(r, "gpu-processes:bad").status == "warn" and "pid 567" in find(r, "gpu-processes:bad").evidence
    )


async def test_doctor_over_ssh_without_nvidia_smi_or_python(sshd: SshdServer, tmp_path: Path) -> None:
    fh = FakeHost(tmp_path / "remote", bin_dir=sshd.bin_dir)
    fh.nvidia_smi(fail="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    r = await doctor(fh.profile([svc(fh)], address="testhost", python="/nonexistent/venv/bin/python"))
    assert find(r, "python").status == "fail" and "/nonexistent/venv/bin/python" in find(r, "python").evidence
    assert find(r, "nvidia-smi").status == "fail" and "couldn't communicate" in find(r, "nvidia-smi").evidence
    assert find(r, "workdir").status == "ok"  # host-side checks ran with the system python3
    assert not findings(r, "torch")


async def test_unreachable_host_is_a_finding(ssh_env: SshEnv, tmp_path: Path) -> None:
    down = ssh_env.add_server("downhost")
    down.stop()
    fh = FakeHost(tmp_path / "remote")
    r = await doctor(fh.profile([svc(fh)], address="downhost", connect_timeout=2))
    assert [f.check for f in r.findings] == ["connection"]
    assert r.findings[0].status == "fail" and "downhost" in r.findings[0].evidence


def test_doctor_cli_all_hosts(sshd: SshdServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fh = FakeHost(tmp_path / "remote", bin_dir=sshd.bin_dir)
    prof = tmp_path / "profiles"
    prof.mkdir()
    env = "".join(f'{k} = "{v}"\n' for k, v in fh.env.items())
    for name, addr in (("a", "testhost"), ("b", "local")):
        (prof / f"{name}.toml").write_text(
            f'name = "{name}"\naddress = "{addr}"\npython = "{sys.executable}"\nworkdir = "{fh.workdir}"\n[env]\n{env}'
        )
    rc = main(["doctor", "--json", "--profiles", str(prof)])
    data = json.loads(capsys.readouterr().out)
    assert [h["host"] for h in data["hosts"]] == ["a", "b"]
    for h in data["hosts"]:
        assert {f["check"]: f["status"] for f in h["findings"]}["torch"] == "ok"
    assert rc == 0

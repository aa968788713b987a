"""Doctor parsers and judges on hand-built facts: nvidia-smi rows, the driver header, hybrid configs, disk."""

from __future__ import annotations

from pathlib import Path

from ddtree_tui.doctor import (
    DISK_FAIL_MB,
    DISK_WARN_MB,
    DoctorReport,
    Finding,
    ProbeReply,
    host_findings,
    is_hybrid,
    parse_driver_cuda,
    parse_smi_apps,
    parse_smi_gpus,
    render,
)
from ddtree_tui.doctor.facts import ModelConfig

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def test_parse_smi_gpus_skips_bad_rows_and_na() -> None:
    text = (FIX / "doctor" / "query-gpu-h200.csv").read_text()
    text += "garbage line\n2, GPU-x, NVIDIA H200, [N/A], 580.159.04, [Not Supported], 7\n"
    gpus = parse_smi_gpus(text)
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[0].compute_cap == "9.0" and gpus[0].mem_used_mb == 21491 and gpus[0].mem_total_mb == 143771
    assert gpus[2].compute_cap is None and gpus[2].mem_total_mb is None and gpus[2].mem_used_mb == 7
    old = parse_smi_gpus(
        "0, GPU-a, NVIDIA A100, 535.1, 81920, 10\n", "index,uuid,name,driver_version,memory.total,memory.used"
    )
    assert old[0].driver_version == "535.1" and old[0].compute_cap is None


def test_parse_apps_and_driver_cuda() -> None:
    apps = parse_smi_apps((FIX / "doctor" / "query-apps.csv").read_text() + "\nnot, a, row\n")
    assert [a.model_dump() for a in apps] == [
        {
            "pid": 567,
            "name": "python3",
            "used_mb": 21482,
            "gpu_uuid": "GPU-a3d17c95-2dae-bb06-e486-01c3ab05eacd",
        }
    ]
    assert parse_driver_cuda((FIX / "gpu" / "nvidia-smi.txt").read_text()) == "13.0"
    assert parse_driver_cuda("NVIDIA-SMI has failed") is None


def test_is_hybrid() -> None:
    def cfg(**kw: object) -> ModelConfig:  # one entry of the probe's "models", as it prints it
        return ModelConfig.model_validate({"path": "/m", "exists": True, "has_config": True, **kw})

    assert (
        is_hybrid(cfg(layer_kinds=["full_attention", "linear_attention"])) == "layer types linear_attention"
    )
    assert is_hybrid(cfg(layer_kinds=["attention", "mamba"])) == "layer types mamba"
    assert is_hybrid(cfg(model_type="qwen3_next", layer_kinds=[])) == "model_type qwen3_next"
    assert is_hybrid(cfg(model_type="x", text_model_type="qwen3_5_moe_text")) == "model_type qwen3_5_moe_text"
    assert is_hybrid(cfg(model_type="llama", layer_kinds=["full_attention"])) is None
    assert is_hybrid(None) is None


def test_disk_thresholds() -> None:
    def disk(free: int) -> Finding:
        fs = host_findings(
            ProbeReply.model_validate(
                {
                    "probe": 1,
                    "python": "3.12.3",
                    "workdir": {
                        "path": "/w",
                        "exists": True,
                        "writable": True,
                        "free_mb": free,
                        "existing": "/w",
                    },
                }
            )
        )
        return next(f for f in fs if f.check == "disk")

    assert disk(DISK_FAIL_MB - 1).status == "fail"
    assert disk(DISK_WARN_MB - 1).status == "warn"
    assert disk(DISK_WARN_MB).status == "ok"


def test_render_shows_fix_only_when_not_ok() -> None:
    r = DoctorReport(
        host="h",
        address="a",
        findings=[
            Finding(check="python", status="ok", evidence="Python 3.12", fix="never shown"),
            Finding(check="torch", status="fail", evidence="torch missing", fix="pip install torch"),
        ],
    )
    text = render(r)
    assert text.splitlines()[0] == "doctor h (a): 1 ok, 0 warn, 1 fail"
    assert "never shown" not in text and "fix: pip install torch" in text
    assert r.worst == "fail"

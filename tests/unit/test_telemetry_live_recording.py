"""The recording made on a real H200 under load replays with the numbers nvidia-smi showed there."""

from __future__ import annotations

from pathlib import Path

from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.telemetry.replay import load_recording

REC = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-h200-live" / "h200-recording.jsonl"


def test_live_h200_recording_replays_with_real_numbers() -> None:
    frames, note = load_recording(str(REC))
    assert len(frames) == 30
    assert "not live" in note
    builder = FrameBuilder(source_override="replay", note=note)
    host, gpus, status = builder.build(frames[0])
    assert status.source == "replay"
    (g,) = gpus
    assert g.name == "NVIDIA H200" and g.mem_total_mb == 143771
    # under the bf16 matmul load: nvidia-smi read 99 %, 1139 MiB, 692 W at the same time
    assert g.util_gpu is not None and g.util_gpu >= 95
    assert g.mem_used_mb is not None and 1000 < g.mem_used_mb < 1300
    assert g.power_w is not None and 600 < g.power_w <= 700
    assert host is not None and host.mem_total_mb == 128887

#!/usr/bin/env bash
# What was run on a real NVIDIA H200 for the telemetry and doctor checks: the local NVML sampler, the remote
# sampler program and nvidia-smi side by side under a bf16 matmul load, a new recording, doctor, status.
# Usage: benchmarks/gpu_session.sh OUTDIR   (needs python3 with this package's dependencies importable)
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
python3 benchmarks/telemetry_gpu_check.py "$out/h200-recording.jsonl" --load --seconds 30 > "$out/telemetry.txt" 2>&1
work=$(mktemp -d)
cat > "$work/h200.toml" <<TOML
name = "h200"
address = "local"
python = "python3"
workdir = "$work/w"

[[service]]
name = "dflash"
algorithm = "dflash"
launcher = "sglang"
model = "/models/Qwen3.6-35B-A3B"
draft_model = "/models/Qwen3.6-35B-A3B-DFlash"
port = 30010
gpus = [0]
attention_backend = "triton"
mem_fraction_static = 0.75
TOML
python3 -m ddtree_tui.cli doctor --profile "$work/h200.toml" > "$out/doctor.txt" 2>&1; echo "doctor exit $?" >> "$out/doctor.txt"
python3 -m ddtree_tui.cli doctor --json --profile "$work/h200.toml" > "$out/doctor.json" 2>&1
python3 -m ddtree_tui.cli status --json --profile "$work/h200.toml" > "$out/status.json" 2>&1
python3 -m ddtree_tui.cli status --profile "$work/h200.toml" > "$out/status.txt" 2>&1
python3 -c "import torch,sys; print(torch.__version__, torch.version.cuda); print(sys.version)" > "$out/versions.txt" 2>&1
pip list 2>/dev/null | grep -iE "torch|triton|transformers|sglang|flashinfer|sgl" >> "$out/versions.txt"

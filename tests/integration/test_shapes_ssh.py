"""Every load shape through the real sshd: the service listens on the host's loopback and the bench reaches it
only through the SSH transport's port forward (the concurrency ladder has its own test in
test_bench_remote.py). Rate, poisson, a soak and agentic sessions each finish with no failed request, write
their schema-2 JSON and append themselves to the history file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess
from tests.sshd import SshdServer, SshEnv
from tests.util import cli_batch, free_port

pytestmark = pytest.mark.sshd

SHAPES: dict[str, list[str]] = {
    "rate": ["--load", "rate:4", "--requests", "4"],
    "poisson": ["--load", "poisson:4,7", "--requests", "4"],
    "soak": ["--soak", "--load", "concurrency:1", "--duration", "2s", "--window", "1s"],  # two windows
    "agentic": ["--prompts", "agentic", "--sessions", "2", "--turns", "2"],
}


def _profile(tmp_path: Path, ssh_env: SshEnv, port: int) -> Path:
    extra = (
        f"python = {json.dumps(sys.executable)}\nconnect_timeout = 5\n\n"
        f'[[service]]\nname = "spec"\nalgorithm = "dflash"\nlauncher = "external"\nport = {port}\n'
    )
    p = tmp_path / "testhost.toml"
    p.write_text(ssh_env.profile_toml("testhost", extra=extra))
    return p


@pytest.mark.slow
def test_each_shape_through_ssh_forward(tmp_path: Path, ssh_env: SshEnv, sshd: SshdServer) -> None:
    """The four shapes one after another against one simulator behind one sshd, in one child process
    (tests/cli_batch.py: the imports paid once); each run opens its own fleet, SSH connection and forward."""
    port = free_port()
    prof = _profile(tmp_path, ssh_env, port)
    base = ["--run-bench", "--profile", str(prof), "--services", "testhost/spec", "--max-new-tokens", "16"]
    base += ["--warmup", "0"]
    files = {shape: (tmp_path / f"{shape}.json", tmp_path / f"{shape}.h.jsonl") for shape in SHAPES}
    with SimProcess(SimConfig(algorithm="dflash", port=port, decode_rate=2000.0, seed=3)):
        done = cli_batch(
            [[*base, *SHAPES[shape], "--json", str(out), "--history", str(hist)] for shape, (out, hist) in files.items()],
            tmp_path, timeout=240, env={"HOME": str(ssh_env.home)},
        )  # fmt: skip
    for (shape, (out, hist)), p in zip(files.items(), done, strict=True):
        _check(shape, out, hist, port, p)


def _check(shape: str, out: Path, hist: Path, port: int, p: subprocess.CompletedProcess[str]) -> None:
    assert p.returncode == 0, (shape, p.stderr)
    doc = json.loads(out.read_text())
    assert doc["schema"] == 2 and doc["failed"] == 0, (shape, doc.get("failed"))
    if shape == "soak":
        assert doc["kind"] == "soak" and len(doc["windows"]) >= 2
        assert {w["service"] for w in doc["windows"]} == {"testhost/spec"}
    elif shape == "agentic":
        assert doc["kind"] == "agentic" and doc["sessions"] == 2
    else:
        assert doc["kind"] == "load" and len(doc["levels"]) == 1, shape
        assert doc["levels"][0]["services"][0]["n"] == 4, shape
    url = doc["targets"][0]["base_url"] if "targets" in doc else None
    if url is not None:  # the forward's local port, never the service's own
        assert url.startswith("http://127.0.0.1:") and int(url.rsplit(":", 1)[1]) != port, (shape, url)
    kinds = [json.loads(line).get("kind") for line in hist.read_text().splitlines() if line.strip()]
    assert doc["kind"] in kinds, (shape, kinds)

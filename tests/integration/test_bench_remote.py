"""`ddtree-tui --run-bench` against a service on a remote host: the real test sshd is the host, a simulated
server listens on its loopback like a service there would, and the bench reaches it only through the SSH
transport's port forward. Also: an unreachable host fails the run fast, naming the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ddtree_tui.bench import report
from ddtree_tui.sim.process import SimProcess, free_port
from ddtree_tui.sim.server import SimConfig
from tests.sshd import SshdServer, SshEnv

pytestmark = pytest.mark.sshd

MAX_NEW = 16


def _profile(tmp_path: Path, ssh_env: SshEnv, port: int, connect_timeout: float = 5) -> Path:
    extra = (
        f"python = {json.dumps(sys.executable)}\nconnect_timeout = {connect_timeout}\n\n"
        f'[[service]]\nname = "spec"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {port}\n'
    )
    p = tmp_path / "testhost.toml"
    p.write_text(ssh_env.profile_toml("testhost", extra=extra))
    return p


def _labels() -> str:
    return f'model_name="{SimConfig().model_path}",tp_rank="0"'


def _bench(
    tmp_path: Path, ssh_env: SshEnv, profile: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ddtree_tui.cli", "--run-bench", "--profile", str(profile)]
    argv += ["--services", "testhost/spec", "--prompts", "seed3", "--max-new-tokens", str(MAX_NEW)]
    argv += ["--warmup", "0", "--json", str(tmp_path / "r.json"), "--history", str(tmp_path / "h.jsonl")]
    env = {**os.environ, "HOME": str(ssh_env.home)}
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def test_bench_through_ssh_forward(tmp_path: Path, ssh_env: SshEnv, sshd: SshdServer) -> None:
    port = free_port()
    with SimProcess(SimConfig(algorithm="dflash", port=port, decode_rate=2000.0, seed=3)) as sim:
        profile = _profile(tmp_path, ssh_env, port)
        p = _bench(tmp_path, ssh_env, profile, timeout=90)
        assert p.returncode == 0, p.stderr
        metrics = urllib.request.urlopen(sim.base_url + "/metrics", timeout=5).read().decode()
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [t["ref"] for t in doc["targets"]] == ["testhost/spec"]
    run = report.from_json((tmp_path / "r.json").read_text())
    assert run.status == "complete" and run.failed == 0
    assert len(run.results) == 3  # seed3, one repeat, no warm-up
    for r in run.results:
        assert r.ok, r.error
        assert r.service == "testhost/spec" and r.mode == "linear"
        assert r.output_tokens == MAX_NEW and r.tokens_source == "meta_info"
    # the bench talked to a local listener of the ssh transport, not to the service port itself
    url = run.targets[0].base_url
    assert url.startswith("http://127.0.0.1:")
    assert int(url.rsplit(":", 1)[1]) != port
    assert run.targets[0].simulated is True
    # and the simulator really served them: its own counters (/health probes do not count)
    counts = dict(
        line.split("} ") for line in metrics.splitlines() if line.startswith("sglang:") and "} " in line
    )
    assert float(counts[f"sglang:num_requests_total{{{_labels()}"]) == 3
    assert float(counts[f"sglang:generation_tokens_total{{{_labels()}"]) == 3 * MAX_NEW
    assert "[3/3]" in p.stderr


def test_unreachable_host_fails_fast(tmp_path: Path, ssh_env: SshEnv, sshd: SshdServer) -> None:
    sshd.stop()
    profile = _profile(tmp_path, ssh_env, free_port(), connect_timeout=1)
    t0 = time.monotonic()
    p = _bench(tmp_path, ssh_env, profile, timeout=60)
    took = time.monotonic() - t0
    assert p.returncode in (1, 2), (p.returncode, p.stderr)
    assert "testhost" in p.stderr and "cannot reach host" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert took < 20, took
    assert not (tmp_path / "r.json").exists()

"""Issue 25: a `ddtree-tui sweep` child stopped by a real SIGTERM, SIGHUP or SIGINT mid-point puts its service
back as it was before the sweep (running with the profile's config, or stopped) and records it (`restored`,
`stopped_by`, `service_before` in sweep.json); `--out` never replaces files the sweep did not write; `sweep
apply --to` a file that is not a profile (not TOML, binary, 2 MiB) is a clear error naming it."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.services.support import cleanup_workdir
from tests.integration.test_sweep import cli_here, demo_copy, read_state
from tests.procs import stop_child

pytestmark = pytest.mark.timeout(240)
CLI = [sys.executable, "-m", "ddtree_tui.cli"]


@pytest.fixture(autouse=True)
def _holds_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))  # the children inherit it


def sweep(profile: Path, out: Path) -> list[str]:
    """Two launch configs of the demo's ddtree-shadow (profile: budget 32), slow enough to be cut mid-point."""
    return [*CLI, "--profile", str(profile), "sweep", "local/ddtree-shadow", "--set", "budget=8,16",
            "--out", str(out), "--repeats", "2", "--warmup", "0", "--max-new-tokens", "400",
            "--no-telemetry"]  # fmt: skip


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def budget_of(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as r:
        return int(json.loads(r.read())["speculative_ddtree_budget"])


def signal_mid_point(
    profile: Path, out: Path, port: int, sig: signal.Signals
) -> subprocess.CompletedProcess[str]:
    """Start the sweep, wait until a point runs with its overrides, send `sig`; the child's result."""
    child = subprocess.Popen(sweep(profile, out), cwd=profile.parent, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            pts = read_state(out).get("points", [])
            if any(p["status"] == "measuring" for p in pts):
                break
            time.sleep(0.05)
        assert child.poll() is None, child.communicate()
        assert budget_of(port) in (8, 16), "the service should be running a point's overrides now"
        child.send_signal(sig)
        stdout, stderr = child.communicate(timeout=90)
    finally:
        stop_child(child)
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.slow
def test_signal_mid_point_puts_a_running_service_back_as_the_profile_has_it(
    tmp_path: Path, sig: signal.Signals
) -> None:
    profile, port = demo_copy(tmp_path)
    try:
        # running before the sweep (launched from this process: the sweep below is the child under test)
        (up,) = cli_here(tmp_path, ["--profile", str(profile), "launch", "local/ddtree-shadow"])
        assert up.returncode == 0, up.stderr
        deadline = time.monotonic() + 30
        while not listening(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert budget_of(port) == 32
        out = tmp_path / "sweep"
        p = signal_mid_point(profile, out, port, sig)
        assert p.returncode == 128 + sig, p.stderr[-2000:]
        state = read_state(out)
        assert state["stopped_by"] == sig.name and state["restored"] is True, state
        assert state["service_before"] == "running" and state["finished"] is False
        assert budget_of(port) == 32, "the service is not back on the profile's config"
        assert f"stopped by {sig.name}" in p.stderr and "Traceback" not in p.stderr
        assert (out / "results.json").is_file()  # the partial results were written
    finally:
        cleanup_workdir(tmp_path / "wd")


@pytest.mark.slow
def test_sigint_mid_point_leaves_a_stopped_service_stopped(tmp_path: Path) -> None:
    profile, port = demo_copy(tmp_path)
    try:
        assert not listening(port)
        out = tmp_path / "sweep"
        p = signal_mid_point(profile, out, port, signal.SIGINT)
        assert p.returncode == 130, p.stderr[-2000:]
        state = read_state(out)
        assert state["stopped_by"] == "SIGINT" and state["restored"] is True, state
        assert state["service_before"] == "stopped"
        assert not listening(port), "a service that was stopped before the sweep is running after it"
        (st,) = cli_here(tmp_path, ["--profile", str(profile), "status", "--json"])
        svc = [
            s for h in json.loads(st.stdout)["hosts"] for s in h["services"] if s["name"] == "ddtree-shadow"
        ]
        assert svc and svc[0]["state"] == "stopped", st.stdout[-2000:]
    finally:
        cleanup_workdir(tmp_path / "wd")


@pytest.mark.slow
def test_out_refuses_a_directory_of_the_users_files_and_keeps_them(tmp_path: Path) -> None:
    profile, _port = demo_copy(tmp_path)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "results.json").write_text('{"mine": true}')
    (out / "results.csv").write_text("mine\n")
    f = tmp_path / "a-file"
    f.write_text("x")
    # the three command lines in this process (tests/cli_batch.py's runner: no child pays the imports)
    *runs, last = cli_here(tmp_path, sweep(profile, out)[3:], [*sweep(profile, out)[3:], "--resume"],
                           sweep(profile, f)[3:])  # fmt: skip
    for p in runs:
        assert p.returncode == 2, p.stderr
        assert "already holds files this sweep did not write (results.csv, results.json)" in p.stderr
        assert "Traceback" not in p.stderr
        assert (out / "results.json").read_text() == '{"mine": true}' and (
            out / "results.csv"
        ).read_text() == "mine\n"
        assert sorted(x.name for x in out.iterdir()) == ["results.csv", "results.json"]
    p = last
    assert p.returncode == 2 and "is not a directory" in p.stderr and f.read_text() == "x"


def _a_finished_sweep_dir(tmp_path: Path) -> Path:
    """A sweep.json with one measured point, as a sweep writes it (apply reads only this)."""
    from ddtree_tui.sweep import state as st
    from ddtree_tui.sweep.spec import parse_set

    out = tmp_path / "done"
    point = st.PointRecord(index=0, overrides={"budget": "16"}, status="done")
    point.measurement = st.Measurement(metrics=st.Metrics(n=1, tok_s=100.0))
    state = st.SweepState(id="x", ref="local/ddtree-shadow", dims=[parse_set("budget=16")], loads=[1],
                          strategy="grid", prompts="seed3", repeats=1, warmup=0, max_new_tokens=8,
                          objective="tok_s", points=[point], started_at=0.0, updated_at=0.0)  # fmt: skip
    st.save(state, out)
    return out


@pytest.mark.slow
def test_apply_to_a_file_that_is_not_a_profile_names_it(tmp_path: Path) -> None:
    out = _a_finished_sweep_dir(tmp_path)
    cases = {
        "notes.md": b"# my notes\nnot = [toml\n",
        "blob.bin": bytes(range(256)) * 4,
        "huge.toml": b"# " + b"x" * (2 * 1024 * 1024) + b"\n",
    }
    want = {"notes.md": "invalid TOML", "blob.bin": "not UTF-8", "huge.toml": "larger than 1024 KiB"}
    for name, body in cases.items():
        (tmp_path / name).write_bytes(body)
    # the three command lines in this process (tests/cli_batch.py's runner: no child pays the imports)
    done = cli_here(
        tmp_path, *[["sweep", "apply", str(out), "--to", str(tmp_path / n), "--yes"] for n in cases]
    )
    for (name, body), p in zip(cases.items(), done, strict=True):
        f = tmp_path / name
        assert p.returncode == 2, (name, p.stderr)
        assert "Traceback" not in p.stderr and str(f) in p.stderr and want[name] in p.stderr, (name, p.stderr)
        assert f.read_bytes() == body

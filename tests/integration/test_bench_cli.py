"""Headless `ddtree-tui --run-bench`: the demo end to end in a child process, exit codes 0/1/2, the files
it writes (JSON, CSV, history), and Ctrl-C saving what was measured."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_tui.bench import history, report
from ddtree_tui.cli import main
from ddtree_tui.sim.config import TIME_SCALE_ENV, SimConfig
from ddtree_tui.sim.process import SimProcess
from tests.util import cli_argv, demo_profile


def _profile(tmp_path: Path, good_port: int, bad_port: int) -> Path:
    p = tmp_path / "loc.toml"
    p.write_text(
        'name = "loc"\naddress = "local"\n\n'
        f'[[service]]\nname = "good"\nalgorithm = "dflash"\nlauncher = "external"\nport = {good_port}\n\n'
        f'[[service]]\nname = "bad"\nalgorithm = "ddtree"\nmode = "tree"\nlauncher = "external"\nport = {bad_port}\n'
    )
    return p


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the demo's sims fast-forwarded: what is checked is not their pace
    monkeypatch.setenv(TIME_SCALE_ENV, "10")
    out = tmp_path / "r.json"
    argv = cli_argv(
        "--run-bench", "--demo", "--profile", str(demo_profile(tmp_path)), "--max-new-tokens", "12"
    )
    argv += ["--json", str(out)]
    argv += ["--csv", str(tmp_path / "r.csv"), "--history", str(tmp_path / "h.jsonl")]
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "SIMULATED" in p.stdout and "shadow-linear" in p.stdout and "linear" in p.stdout
    assert "[6/6]" in p.stderr and "warm-up" in p.stderr
    run = report.from_json(out.read_text())
    assert json.loads(out.read_text())["schema"] == 1
    assert run.status == "complete" and run.failed == 0 and len(run.results) == 6
    assert {t.ref for t in run.targets} == {"local/dflash", "local/ddtree-shadow"}
    assert all(t.simulated for t in run.targets) and run.baseline == "local/dflash"
    assert [r.mode for r in run.rows[:2]] == ["linear", "shadow-linear"]
    assert report.from_csv((tmp_path / "r.csv").read_text()) == run.rows
    assert [h.id for h in history.load(tmp_path / "h.jsonl")] == [run.id]


@pytest.mark.parametrize(
    "extra",
    [
        ["--services", "local/nope"],
        ["--services", "nohost/x"],
        ["--prompts", "missing.jsonl"],
        ["--prompts", "nosuchset"],
        ["--baseline", "local/other"],
        ["--repeats", "0"],
        ["--timeout", "-1"],
    ],
)
def test_usage_errors_exit_2(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--run-bench", "--demo", *extra]) == 2
    assert "ddtree-tui --run-bench:" in capsys.readouterr().err


def test_bad_profile_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\naddress = "local"\n[[service]]\nname = "s"\nport = "high"\n')
    assert main(["--run-bench", "--profile", str(bad)]) == 2
    assert "bad.toml" in capsys.readouterr().err


@pytest.mark.slow
def test_failed_requests_exit_1_and_the_rest_is_saved(tmp_path: Path) -> None:
    with (
        SimProcess(SimConfig(decode_rate=2000, load_time=0)) as good,
        SimProcess(
            SimConfig(algorithm="ddtree", mode="tree", decode_rate=2000, load_time=0, faults=["drop=3"])
        ) as bad,
    ):
        prof = _profile(tmp_path, good.port, bad.port)
        out = tmp_path / "r.json"
        rc = main(
            [
                "--run-bench",
                "--profile",
                str(prof),
                "--warmup",
                "0",
                "--max-new-tokens",
                "10",
                "--json",
                str(out),
                "--history",
                str(tmp_path / "h.jsonl"),
            ]
        )
    assert rc == 1
    run = report.from_json(out.read_text())
    assert run.failed == 3 and len(run.results) == 6
    assert all(r.ok for r in run.results if r.service == "loc/good")
    assert all(not r.ok and r.mode == "tree" for r in run.results if r.service == "loc/bad")


@pytest.mark.slow
def test_ctrl_c_saves_what_was_measured(tmp_path: Path) -> None:
    with (
        SimProcess(SimConfig(decode_rate=20, load_time=0)) as a,
        SimProcess(SimConfig(decode_rate=20, load_time=0)) as b,
    ):
        prof = _profile(tmp_path, a.port, b.port)
        out = tmp_path / "r.json"
        err = tmp_path / "err.txt"
        argv = [
            sys.executable,
            "-m",
            "ddtree_tui.cli",
            "--run-bench",
            "--profile",
            str(prof),
            "--warmup",
            "0",
            "--repeats",
            "5",
            "--max-new-tokens",
            "8",
            "--json",
            str(out),
            "--history",
            str(tmp_path / "h.jsonl"),
        ]
        with open(err, "w") as ef:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=ef, text=True)
            try:
                deadline = time.monotonic() + 20
                while "[2/30]" not in err.read_text() and time.monotonic() < deadline:
                    time.sleep(0.05)
                proc.send_signal(signal.SIGINT)
                stdout, _ = proc.communicate(timeout=20)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    assert proc.returncode == 130, err.read_text()
    run = report.from_json(out.read_text())
    assert run.status == "interrupted" and 2 <= len(run.results) < 30
    assert "interrupted" in stdout
    assert history.load(tmp_path / "h.jsonl")[0].id == run.id

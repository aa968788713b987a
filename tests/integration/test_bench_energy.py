"""GPU telemetry and energy joined to a run (issue 26), end to end through real sockets: the demo's
simulated services launched by `--run-bench --demo --energy` in a child process, their GPU sampled by the
fleet's own telemetry (the replay, its power following the simulated load), the run's JSON, CSV, table and
HTML carrying the same figures; a `--url` target saying it has no GPU telemetry."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pytest

from ddtree_tui.bench import report
from ddtree_tui.bench.energy import URL_NOTE
from ddtree_tui.cli import main
from ddtree_tui.sim.config import TIME_SCALE_ENV, SimConfig
from ddtree_tui.sim.process import SimProcess
from ddtree_tui.telemetry import powermodel
from tests.util import cli_argv, demo_profile


def _fast_start(profile_text: str) -> str:
    """The demo profile with its simulators' model load (1.5 s and 2 s, real seconds at time scale 1) cut to
    0.2 s: the energy is the run's, measured once the services are ready; how long they took to load is not."""
    out = profile_text.replace("load_time = 1.5", "load_time = 0.2").replace(
        "load_time = 2.0", "load_time = 0.2"
    )
    assert out.count("load_time = 0.2") == 2, "the demo profile's load times changed: update this test"
    return out


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_demo_energy_joined_to_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "1")  # the power follows the real pace of the requests
    prof = demo_profile(tmp_path)
    prof.write_text(
        _fast_start(prof.read_text().replace("interval_ms = 1000", "interval_ms = 200"))
    )  # enough samples
    out, html, csvf = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "r.csv"
    argv = cli_argv(
        "--run-bench", "--demo", "--profile", str(prof), "--energy", "--max-new-tokens", "64",
        "--json", str(out), "--html", str(html), "--csv", str(csvf), "--history", str(tmp_path / "h.jsonl"),
    )  # fmt: skip
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    assert p.returncode == 0, p.stderr
    raw = json.loads(out.read_text())
    run = report.from_json(out.read_text())
    en = run.energy
    assert en is not None and en.note is None, en
    assert en.source is not None and "replay/simulated" in en.source
    assert en.samples >= 3 and en.energy_j is not None and en.energy_j > 0
    (gpu,) = en.gpus
    assert gpu.host == "local" and gpu.gpu == 0 and gpu.join == "profile" and gpu.source == "replay"
    assert set(gpu.services) == {"local/dflash", "local/ddtree-shadow"} and gpu.coverage >= 0.9
    # the modelled power followed the load: one request at a time, so mostly P(1), never above TDP
    assert gpu.mean_power_w is not None and powermodel.POWER_IDLE_W <= gpu.mean_power_w <= powermodel.power_w(
        2
    )
    assert gpu.windows and all(w.samples >= 0 for w in gpu.windows)
    # every joule is a request's or idle, and the requests' add up to the services'
    per_request = [r.energy_j for r in run.results]
    assert all(j is not None and j > 0 for j in per_request)
    assert sum(j or 0 for j in per_request) + (gpu.idle_energy_j or 0) == pytest.approx(en.energy_j, rel=1e-9)
    for s in en.services:
        mine = [r for r in run.results if r.service == s.service]
        assert s.energy_j == pytest.approx(sum(r.energy_j or 0 for r in mine))
        assert s.j_per_token == pytest.approx(s.energy_j / sum(r.output_tokens or 0 for r in mine))
    assert en.j_per_token == pytest.approx(en.energy_j / en.output_tokens)
    # acceptance per service, in the same run
    assert {a.service for a in run.acceptance} == {"local/dflash", "local/ddtree-shadow"}
    assert all(a.n == 3 and a.mean and a.histogram for a in run.acceptance)
    assert raw["energy"]["j_per_token"] == en.j_per_token
    # the same figures in the table, the CSV and the HTML
    assert f"{en.j_per_token:.3f} J/token" in p.stdout
    rows = list(csv.DictReader(io.StringIO(csvf.read_text())))
    assert rows and all(float(r["j_per_token"]) > 0 for r in rows)
    page = html.read_text()
    assert "<h2>GPU telemetry and energy</h2>" in page and "<h2>Per-request acceptance</h2>" in page
    assert f"{en.j_per_token:.3f} J/token" in page and "chart-accept-tok-s" in page
    svc = en.services[0]
    assert svc.j_per_token is not None and f"{svc.j_per_token:.3f}" in page
    acc = run.acceptance[0]
    assert acc.median is not None and f"{acc.median:.2f}" in page


def test_url_targets_have_no_gpu_telemetry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    with SimProcess(SimConfig(decode_rate=2000, load_time=0)) as sim:
        rc = main(
            [
                "--run-bench", f"--url=http://127.0.0.1:{sim.port}", "--energy", "--warmup", "0",
                "--max-new-tokens", "8", "--json", str(out), "--history", str(tmp_path / "h.jsonl"),
            ]
        )  # fmt: skip
    assert rc == 0
    run = report.from_json(out.read_text())
    assert run.energy is not None and run.energy.note == URL_NOTE and run.energy.energy_j is None
    assert all(r.energy_j is None for r in run.results)
    assert "no GPU telemetry for URL targets" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_demo_load_ladder_energy_per_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "1")
    prof = demo_profile(tmp_path)
    prof.write_text(_fast_start(prof.read_text().replace("interval_ms = 1000", "interval_ms = 200")))
    out, html = tmp_path / "l.json", tmp_path / "l.html"
    argv = cli_argv(
        "--run-bench", "--demo", "--profile", str(prof), "--services", "local/dflash", "--energy",
        "--load", "concurrency:1,4", "--requests", "8", "--max-new-tokens", "64", "--json", str(out),
        "--html", str(html), "--history", str(tmp_path / "h.jsonl"),
    )  # fmt: skip
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    assert p.returncode == 0, p.stderr
    raw = json.loads(out.read_text())
    assert raw["energy"]["energy_j"] > 0 and raw["acceptance"][0]["service"] == "local/dflash"
    levels = {lv["label"]: lv["energy"] for lv in raw["level_energy"]}
    assert set(levels) == {"c=1", "c=4"}
    for en in levels.values():
        (svc,) = en["services"]
        # a number where the level had samples enough, else the reason instead of a number
        assert (svc["j_per_token"] is not None and svc["j_per_token"] > 0) or "too few" in (svc["note"] or "")
    page = html.read_text()
    assert "<h2>GPU telemetry and energy</h2>" in page and "<h3>Per level</h3>" in page
    assert (
        f"{raw['energy']['j_per_token']:.3f} J/token" in page
        and f"{raw['energy']['j_per_token']:.3f} J/token" in p.stdout
    )


@pytest.mark.parametrize(
    "extra", [["--soak", "--duration", "10s"], ["--prompts", "agentic", "--sessions", "2"]]
)
def test_energy_is_refused_where_it_is_not_made(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--run-bench", "--demo", "--energy", *extra]) == 2
    assert "--energy is for plain runs and --load ladders" in capsys.readouterr().err

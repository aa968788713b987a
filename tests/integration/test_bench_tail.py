"""Issue 26's loose ends through real sockets: a poisson level judged "reached" against its planned schedule
(like gamma), and an agentic run's HTML page with its slices and the server's figures."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.models import BenchTarget, ShapeRequest
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess
from tests.util import cli_argv, free_port


@pytest.mark.slow
def test_a_sparse_poisson_draw_is_judged_against_its_planned_schedule() -> None:
    """Seed 14 draws 8 sends at 5.3 req/s for a nominal 10: sent on time it is reached (the old rule, sent
    rate against the nominal, read NOT REACHED); the nominal rate stays in the workload's schedule."""
    load = parse_load("poisson:10,14")
    sim = SimProcess(
        SimConfig.realistic(algorithm="dflash", port=free_port(), accept_length=3.0, decode_rate=400.0)
    )
    with sim:
        t = BenchTarget(ref="h/spec", base_url=sim.base_url, algorithm="dflash", mode="linear")
        req = ShapeRequest(load=load.text, max_new_tokens=8, warmup=0, prompts="seed3")
        run = asyncio.run(run_load(req, [t], load, LoadSettings(requests=8)))
    assert run.status == "complete" and run.failed == 0
    [s] = run.workload.schedules if run.workload else []
    assert s.offered_rate == 10 and s.planned == s.sent == 8
    assert s.planned_rate is not None and s.planned_rate < 0.9 * 10  # a sparse draw: far under nominal
    [ls] = run.levels[0].services
    assert ls.offered_rate == pytest.approx(s.planned_rate)  # judged against the schedule planned
    assert ls.reached, ls.shortfall


def _profile(tmp_path: Path) -> Path:
    svc = (
        f'[[service]]\nname = "a"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {free_port()}\n'
        "[service.sim]\naccept_length = 3.0\ndecode_rate = 80.0\nload_time = 0.1\nseed = 1\n"
    )
    p = tmp_path / "p.toml"
    p.write_text(f'name = "local"\naddress = "local"\npython = {json.dumps(sys.executable)}\n\n{svc}')
    return p


@pytest.mark.slow
def test_agentic_sessions_get_an_html_page_with_slices_and_server_figures(tmp_path: Path) -> None:
    page, out = tmp_path / "ag.html", tmp_path / "ag.json"
    argv = cli_argv("--run-bench", "--demo", "--profile", str(_profile(tmp_path)), "--max-new-tokens", "16")
    argv += [
        "--history",
        str(tmp_path / "h.jsonl"),
        "--sessions",
        "2",
        "--turns",
        "2",
        "--prompts",
        "agentic",
    ]
    argv += ["--slice", "1s", "--server-metrics", "--flush-cache", "--json", str(out), "--html", str(page)]
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    html = page.read_text()
    assert f"Agentic sessions {doc['id']}" in html and "<script" not in html
    assert "local/a" in html and "median completion" in html  # the per-turn table, as on stdout
    for h in ("Time slices", "Server metrics", "Cache flushes"):
        assert h in html, h
    # the report command writes the same page from the JSON
    again = tmp_path / "again.html"
    r = subprocess.run(
        cli_argv("report", str(out), "--html", str(again)), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert f"Agentic sessions {doc['id']}" in again.read_text()

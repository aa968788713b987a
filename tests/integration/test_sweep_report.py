"""A sweep's HTML report, from real small sweeps on the simulator (2 x 2 points, few tokens), opened in a real
headless Chromium with the run reports' checks: no request leaves the file, every chart is present and drawn,
a screenshot is kept. Written by `sweep --html` at the end (also of an interrupted sweep), by `sweep show DIR
--html` and by `report DIR/results.json --html`; failed points appear as failed; a results.json of another
schema exits 2 naming the file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from html import escape
from pathlib import Path

import pytest

from ddtree_tui.report.browser import check_page
from ddtree_tui.sim.config import TIME_SCALE_ENV
from tests.fixtures.services.support import cleanup_workdir, profile_toml
from tests.integration.test_report_html import _assert_clean
from tests.integration.test_sweep import cli_here, demo_copy, read_state
from tests.util import free_port

pytestmark = pytest.mark.timeout(300)
SWEEP_CHARTS = {"chart-sweep-pareto", "chart-sweep-accept", "chart-sweep-heat", "chart-sweep-trials"}


@pytest.fixture(autouse=True)
def _holds_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))  # the children inherit it
    # The simulators the sweeps launch run 10x fast (their load time, decode steps): these tests check what
    # the report shows of what was measured and how it was ended, not the simulated pace.
    monkeypatch.setenv(TIME_SCALE_ENV, "10")


def _grid(profile: Path, out: Path, html: Path) -> list[str]:
    return ["--profile", str(profile), "sweep", "local/ddtree-shadow",
            "--set", "mode=tree", "--set", "budget=8,16", "--set", "env.SGLANG_DDTREE_MAX_TOPK=1,2",
            "--repeats", "2", "--warmup", "0", "--max-new-tokens", "16", "--out", str(out), "--html", str(html)]  # fmt: skip


@pytest.mark.slow
@pytest.mark.browser
def test_sweep_report_in_a_browser_from_sweep_show_and_report(tmp_path: Path) -> None:
    profile, _port = demo_copy(tmp_path)
    out, html = tmp_path / "sweep", tmp_path / "sweep.html"
    try:
        # in this process (nobody signals it: its files and output are what is checked)
        (p,) = cli_here(tmp_path, _grid(profile, out, html))
    finally:
        cleanup_workdir(tmp_path / "wd")
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"wrote {html}" in p.stderr
    text = html.read_text()
    res = json.loads((out / "results.json").read_text())
    best = next(q for q in res["points"] if q["index"] == res["best"])
    for needle in (
        "SIMULATED",
        "Manifest",
        "local/ddtree-shadow",
        "DDTREE",  # the algorithm the points' servers reported
        "budget = 8, 16",  # the dimensions and their values
        "env.SGLANG_DDTREE_MAX_TOPK = 1, 2",
        "closed loop, concurrency 1",
        "seed3",
        "2 measured after 0 warm-up(s)",
        "server=",  # versions
        "NVIDIA H200",  # the demo's (replayed) GPU, labelled
        "(replay)",
        "What this sweep cannot know",
        "Ranked points",
        "95 % CI",
        "Best point",
        "Heat map of tok_s: budget × env.SGLANG_DDTREE_MAX_TOPK",
    ):
        assert needle in text, needle
    assert res["caveats"] and all(f"<li>{escape(c, quote=True)}</li>" in text for c in res["caveats"])
    assert "--budget" in res["best_command"] and escape(res["best_command"], quote=True) in text
    assert f"#{best['index']} {best['label']}" in text
    assert "<script" not in text and "data:image" not in text  # charts are vector SVG, no raster inside
    check = check_page(html, tmp_path / "report-sweep.png")
    _assert_clean(check, html, SWEEP_CHARTS)
    assert check.text_chars > 1500
    heat = next(c for c in check.charts if c.id == "chart-sweep-heat")
    assert heat.texts >= 4 + 4  # every cell's value written as text, plus the axes

    # the same page from the results file, and again from `sweep show DIR --html`; then bad inputs. The five
    # command lines run in this process (tests/cli_batch.py's runner: the imports paid once, not five times)
    again, shown = tmp_path / "again.html", tmp_path / "shown.html"
    bad, bad2 = tmp_path / "bad" / "results.json", tmp_path / "bad2" / "results.json"
    for f, doc in ((bad, {**res, "schema": 99}), (bad2, {**res, "points": [{"index": "x"}]})):
        f.parent.mkdir()
        f.write_text(json.dumps(doc))
    r, s, b, b2, m = cli_here(
        tmp_path,
        ["report", str(out / "results.json"), "--html", str(again)],
        ["sweep", "show", str(out), "--html", str(shown)],
        ["report", str(bad), "--html", str(tmp_path / "no.html")],
        ["report", str(bad2), "--html", str(tmp_path / "no.html")],
        ["report", str(out / "results.json"), str(out / "results.json")],
    )
    assert r.returncode == 0, r.stderr
    assert "best: #" in r.stdout and f"wrote {again}" in r.stderr
    assert s.returncode == 0, s.stderr
    for h in (again, shown):
        t = h.read_text()
        assert (
            "budget = 8, 16" in t
            and "What this sweep cannot know" in t
            and t.count("data-chart=") == len(SWEEP_CHARTS)
        )

    # a results.json of another schema, or of another shape: exit 2, the file named, nothing written
    assert b.returncode == 2 and str(bad) in b.stderr and "schema 99" in b.stderr, b.stderr
    assert b2.returncode == 2 and str(bad2) in b2.stderr and "points.0" in b2.stderr, b2.stderr
    assert not (tmp_path / "no.html").exists()
    assert m.returncode == 2 and "on their own" in m.stderr


@pytest.mark.slow
@pytest.mark.browser
def test_failed_points_and_an_interrupted_sweep_in_the_report(tmp_path: Path) -> None:
    """mode x budget on a hybrid target: tree mode crashes at start, so two of the four cells are failed and
    drawn as such; then a sweep interrupted with SIGINT after its first point still writes its report."""
    wd = tmp_path / "wd"
    # 50 passes/s (was 400): at 2.5 ms a pass a 16-token stream lasted ~12 ms, and a busy client read each
    # whole in one socket read, so no request had an ITL, no point a step time, and the accept-length chart
    # (which needs both) was left out; at 20 ms a pass its chunks get reads of their own
    sim = (
        f'[[service]]\nname = "dd"\nalgorithm = "ddtree"\nmode = "shadow-linear"\nlauncher = "sim"\n'
        f"port = {free_port()}\nbudget = 16\nstartup_timeout = 20\n[service.sim]\ndecode_rate = 50.0\n"
        "load_time = 0.1\nhybrid = true\n"
    )
    prof = tmp_path / "h.toml"
    prof.write_text(profile_toml("h", "local", wd, sim))
    base = ["--profile", str(prof), "sweep", "h/dd", "--no-telemetry", "--repeats", "1", "--max-new-tokens",
            "16", "--warmup", "0"]  # fmt: skip
    html = tmp_path / "failed.html"
    try:
        # in this process (nobody signals it); the interrupted sweep below is a child of its own
        (p,) = cli_here(tmp_path, [*base, "--set", "mode=shadow-linear,tree", "--set", "budget=8,16", "--out",
                                   str(tmp_path / "a"), "--html", str(html)])  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
        statuses = sorted(q["status"] for q in read_state(tmp_path / "a")["points"])
        assert statuses == ["done", "done", "failed", "failed"]
        text = html.read_text()
        assert "Not measured: 2 failed, 0 rejected, 0 skipped" in text
        assert text.count('<span class="worse">failed</span>') == 2  # in the ranked table, with the error
        heat = text[text.index('id="chart-sweep-heat"') :]
        assert heat.count(">failed<") >= 2  # the cells say so, as text
        check = check_page(html, tmp_path / "report-sweep-failed.png")
        _assert_clean(check, html, SWEEP_CHARTS)

        # SIGINT after the first point: exit 130, partial results and the report written, marked PARTIAL
        out, part = tmp_path / "b", tmp_path / "partial.html"
        argv = [sys.executable, "-m", "ddtree_tui.cli", *base, "--set", "budget=8,16,24", "--out", str(out),
                "--html", str(part)]  # fmt: skip
        child = subprocess.Popen(
            argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 100
        while time.monotonic() < deadline and child.poll() is None:
            if any(q["status"] == "done" for q in read_state(out).get("points", [])):
                break
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGINT)  # our own child, by its pid
        _o, err = child.communicate(timeout=60)
        assert child.returncode == 130, err[-3000:]
        assert "interrupted" in err and f"wrote {part}" in err
        t = part.read_text()
        assert "PARTIAL" in t and "--resume" in t
        assert json.loads((out / "results.json").read_text())["points"][0]["status"] == "done"
    finally:
        cleanup_workdir(wd)

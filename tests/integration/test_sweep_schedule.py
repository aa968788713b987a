"""A demo sweep end to end writes the schedule: a real `ddtree-tui sweep` child measures two DDTree settings of
the demo at two concurrency levels (`--levels`) against a simulated non-speculative baseline service measured
interleaved (`--baseline`); every measurement starts with the fair-arm checks (the cache flushed on both
services, the GPU read from the demo's replayed telemetry and waited for or flagged); the schedule, its bands
and its crossover land in results.json / results.csv and `sweep show`; `sweep report DIR` writes the HTML;
`sweep apply --schedule` writes one service per band into a copy of the profile, comments kept.

The baseline is given 2.5x the decode rate of the speculative service (a knob of the simulator, said here) so
that, with the simulator's batch slowdown, the crossover falls between c=1 and c=16 in a short ladder:
at c=1 the best setting is ~1.36x the baseline, at c=16 ~0.75x (sim/config.py's DDTree model)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.sim.config import (
    BATCH_GROWTH_BASELINE,
    BATCH_GROWTH_SPEC,
    TIME_SCALE_ENV,
    ddtree_expected_speed,
)
from tests.fixtures.services.support import cleanup_workdir
from tests.integration.test_sweep import cli_here, demo_copy
from tests.util import free_port

pytestmark = pytest.mark.timeout(400)
# Half the rates the test first had (60 and 150): the baseline at c=16 streamed ~4200 tokens/s, one a chunk,
# and on a busy CI machine the simulator and client could not keep up with it while the speculative arm (a
# few tokens a chunk) could, so speculation "won" at c=16 (p 0.51). The ratios, which decide who wins at each
# level, are the model's at any rate.
SPEC_RATE, BASE_RATE = 30.0, 75.0
MAX_TEMP = 36  # the replayed H200 runs 33..57 °C: some points wait for it, some are flagged


@pytest.fixture(autouse=True)
def _holds_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))
    # The simulators at their own pace (scale 1): the rates' ratios, which decide who wins at each level, are
    # the model's at any scale, but every chunk costs the client and the simulator CPU, and the baseline at
    # c=16 streams one token a chunk. Measured on a machine at load 6: c=1 +23 % / c=16 -18 % against the
    # baseline at scale 1, +19.5 % / -15.5 % at 3. At scale 2 a whole fresh-clone run beside 2 CPU hogs
    # starved the baseline (c=16 samples down to 41 tok/s against a modelled 130) and speculation "won" at
    # c=16; scale 1 halves every chunk rate (the test takes ~40 s instead of ~26).
    monkeypatch.setenv(TIME_SCALE_ENV, "1")


def expected_ratio(budget: int, c: int) -> float:
    spec = SPEC_RATE * ddtree_expected_speed(3.4, budget, 2, c) / (1 + BATCH_GROWTH_SPEC * (c - 1))
    return spec / (BASE_RATE / (1 + BATCH_GROWTH_BASELINE * (c - 1)))


@pytest.mark.slow
def test_demo_sweep_writes_the_schedule_with_fair_arms_and_applies_it(tmp_path: Path) -> None:
    assert expected_ratio(16, 1) > 1.3 and max(expected_ratio(b, 16) for b in (8, 16)) < 0.8
    profile, _port = demo_copy(tmp_path)
    text = profile.read_text().replace("decode_rate = 250.0", f"decode_rate = {SPEC_RATE}\nrealistic = true")
    text += (
        f'\n[[service]]\nname = "base"\nalgorithm = "baseline"\nlauncher = "sim"\nport = {free_port()}\n'
        f"gpus = [0]\n[service.sim]\ndecode_rate = {BASE_RATE}\nload_time = 0.2\nrealistic = true\nseed = 3\n"
    )
    profile.write_text(text)
    original = profile.read_text()
    out = tmp_path / "sweep"
    try:
        # the launches and the sweep in this process (nobody signals the sweep: its files and output are what
        # is checked; tests/cli_batch.py's runner, no child paying the imports); a GPU hotter than MAX_TEMP is
        # waited for up to 1 s, then flagged
        pf = ["--profile", str(profile)]
        *ups, p = cli_here(
            tmp_path, [*pf, "launch", "local/base"], [*pf, "launch", "local/ddtree-shadow"],
            [*pf, "sweep", "local/ddtree-shadow", "--set", "mode=tree", "--set", "budget=8,16",
             "--set", "env.SGLANG_DDTREE_MAX_TOPK=2", "--levels", "1,16", "--baseline", "local/base",
             "--repeats", "2", "--max-new-tokens", "32", "--out", str(out),
             "--gpu-max-temp", str(MAX_TEMP), "--settle-timeout", "1"],
        )  # fmt: skip
        for up in ups:
            assert up.returncode == 0, up.stderr
        assert p.returncode == 0, p.stderr[-3000:]
        state = json.loads((out / "sweep.json").read_text())
        done = [q for q in state["points"] if q["status"] == "done"]
        assert len(done) == 4, [(q["index"], q["status"], q["error"]) for q in state["points"]]
        for q in done:  # the fair arms, recorded per point
            f = q["fairness"]
            assert f["flushed"] is True and f["flush_error"] is None, f
            g = f["gpus"][0]
            assert g["source"] == "replay" and g["temp_c"] is not None
            hot = any("GPU not settled" in x for x in f["flags"])
            assert hot == (g["temp_c"] > MAX_TEMP), f  # a hot GPU after the wait is flagged, a cool one not
            assert all(s["started_at"] is not None for s in q["measurement"]["samples"])

        res = json.loads((out / "results.json").read_text())
        s = res["schedule"]
        assert [lv["concurrency"] for lv in s["levels"]] == [1, 16]
        c1, c16 = s["levels"]
        assert c1["chosen"] is not None and c1["baseline_median"] is not None, c1
        assert c1["speculation_wins"] is True and c16["speculation_wins"] is False, s["levels"]
        assert s["crossover"] == 16 and "between c=1 and c=16" in s["crossover_text"]
        assert [b["name"] for b in s["bands"]] == ["c1", "c16"] and s["bands"][1]["use_baseline"]
        assert res["drift"]["steps"], res["drift"]  # the interleaved baseline, per point
        rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
        assert sum(r["chosen"] == "True" for r in rows) == 2 and all(r["flushed"] == "True" for r in rows)
        assert "schedule per concurrency" in p.stdout and "crossover: speculation stops beating" in p.stdout

        copy = tmp_path / "copy.toml"
        copy.write_text(original)
        # show, report, apply: in this process too
        sw = ["--profile", str(profile), "sweep"]
        sh, rep, a = cli_here(
            tmp_path, [*sw, "show", str(out)], [*sw, "report", str(out)],
            [*sw, "apply", str(out), "--schedule", "--to", str(copy), "--yes"],
        )  # fmt: skip
        assert sh.returncode == 0 and "bands:" in sh.stdout and "c16" in sh.stdout, sh.stderr
        assert rep.returncode == 0, rep.stderr
        html = (out / "report.html").read_text()
        assert "Schedule per concurrency" in html and 'id="chart-sweep-crossover"' in html
        assert "SIMULATED" in html and "Fair arms" in html

        assert a.returncode == 0, a.stderr
        new = copy.read_text()
        assert all(ln in new for ln in original.splitlines() if ln.strip().startswith("#"))
        band = parse_profile(new, copy).get_service("ddtree-shadow-c1")
        assert band is not None and band.mode == "tree" and str(band.budget) == c1["overrides"]["budget"]
        assert parse_profile(new, copy).get_service("ddtree-shadow-c16") is None  # the baseline runs there
        assert profile.read_text() == original
    finally:
        cleanup_workdir(tmp_path / "wd")

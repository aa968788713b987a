"""One Δ, one interval (issue 29): `report a.json` on a run with a baseline printed two different 95 %
intervals for the same Δ (−16.6…−7.4 and −16.5…−7.3), and the HTML and the JSON each carried another. The
run stores its Δ and interval once (bench/metrics.baseline_delta); the text report, the HTML and the JSON
must all carry that one string."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import pytest

from ddtree_tui.bench.stats import ci_text, stored_delta
from ddtree_tui.sim.config import TIME_SCALE_ENV
from tests.util import cli_batch, demo_profile

CI = re.compile(r"95 % CI (\S+ … \S+ %)")


@pytest.mark.slow
def test_report_text_html_and_json_carry_the_one_stored_interval(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    # the demo on free ports (its own ports 31010/31011 are taken when another test runs a demo meanwhile)
    page = tmp_path / "a.html"
    # the run, then the text and the HTML report, in one child process (tests/cli_batch.py: the imports paid
    # once); the demo's simulators fast-forwarded: what is checked is that every report carries the stored
    # interval, whatever the figures are
    p, r, h = cli_batch(
        [["--run-bench", "--demo", "--profile", str(demo_profile(tmp_path)), "--max-new-tokens", "12",
          "--repeats", "3", "--json", str(out), "--history", str(tmp_path / "h.jsonl")],
         ["report", str(out)], ["report", str(out), "--html", str(page)]],
        tmp_path, env={TIME_SCALE_ENV: "10"},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["baseline"] == "local/dflash"
    s = next(x for x in doc["summary"] if x["service"] == "local/ddtree-shadow")
    d = stored_delta(s["delta_tok_s_pct"], s["delta_tok_s_lo_pct"], s["delta_tok_s_hi_pct"], s["delta_n"],
                     s["delta_method"])  # fmt: skip
    want = ci_text(d).removeprefix("95 % CI ")
    assert want and s["delta_verdict"] and want in s["delta_verdict"]  # the JSON's own figure
    assert r.returncode == 0 and h.returncode == 0, r.stderr + h.stderr
    # every tok/s interval the text prints for that service is the stored one (the table's verdict line and
    # the verdicts section both), and there are at least two of them
    text_cis = [m for line in r.stdout.splitlines() if "local/ddtree-shadow" in line and "TTFT" not in line
                for m in CI.findall(line)]  # fmt: skip
    assert len(text_cis) >= 2 and set(text_cis) == {want}, r.stdout
    # the HTML: the per-service table's interval cell and the verdict carry the same string
    body = htmllib.unescape(re.sub(r"<[^>]+>", "\n", page.read_text()))
    assert f"\n{want}\n" in body, want
    verdicts = [m for line in body.splitlines() if "local/ddtree-shadow vs" in line and "tok/s" in line
                for m in CI.findall(line)]  # fmt: skip
    assert verdicts and set(verdicts) == {want}

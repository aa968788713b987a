"""HTML reports from real recorded runs (the demo's simulated services through `--run-bench`), opened in a
real headless Chromium: no request leaves the file, every chart is present and drawn, a screenshot is kept.

Screenshots land in the test's tmp dir and, when DDTREE_TEST_ARTIFACTS names a folder, are copied there
(for CI artifacts). The browser check itself is shown able to fail: a page that loads from the network, a
CSP violation, an empty chart.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddtree_tui.report.browser import Browser, PageCheck, check_page
from ddtree_tui.report.html import CSP
from ddtree_tui.sim.config import TIME_SCALE_ENV
from tests.util import cli_batch, demo_profile, serve_http

# every test here shares the `runs` fixture (three demo runs, slow): one xdist worker makes it once (loadgroup)
pytestmark = [pytest.mark.xdist_group("report_html_runs"), pytest.mark.slow]

ALL_CHARTS = {
    "chart-tok-s",
    "chart-deltas",
    "chart-ttft-cdf",
    "chart-itl-cdf",
    "chart-accept",
    "chart-chunks",
    "chart-accept-tok-s",  # issue 26: the demo's runs carry per-request accept lengths, drawn against tok/s
}


def _record_args(d: Path, name: str, *extra: str) -> list[str]:
    """`--run-bench` of the demo into d/NAME.json (and d/history.jsonl)."""
    return ["--demo", "--profile", str(demo_profile(d)),  # free ports: other tests run demos meanwhile
            "--run-bench", "--repeats", "3", "--warmup", "0", "--max-new-tokens", "24",
            "--json", str(d / f"{name}.json"), "--history", str(d / "history.jsonl"), *extra]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Path], dict[str, subprocess.CompletedProcess[str]]]:
    """Three real runs of the demo: A and B alike, C at concurrency 3; A also written as HTML by --run-bench.
    The three run one after another in one child process (tests/cli_batch.py: the imports paid once), each
    with its own fleet, simulators and sockets; the same child then writes the reports that the tests only
    read (`report A --html one.html`, `report A B --html ab.html`): the runs' paths, and those reports'
    processes."""
    d = tmp_path_factory.mktemp("runs")
    a, b = str(d / "a.json"), str(d / "b.json")
    done = cli_batch(
        [_record_args(d, "a", "--html", str(d / "a-direct.html")), _record_args(d, "b"),
         _record_args(d, "c", "--concurrency", "3"),
         ["report", a, "--html", str(d / "one.html")], ["report", a, b, "--html", str(d / "ab.html")]],
        d, timeout=300,
        env={TIME_SCALE_ENV: "10"},  # the reports read the runs; how fast the sims ran is not the point
    )  # fmt: skip
    for p in done[:3]:
        assert p.returncode == 0, p.stderr
    paths = {"a": d / "a.json", "b": d / "b.json", "c": d / "c.json", "dir": d}
    return paths, {"one": done[3], "ab": done[4]}


@pytest.fixture(scope="module")
def runs(
    recorded: tuple[dict[str, Path], dict[str, subprocess.CompletedProcess[str]]],
) -> dict[str, Path]:
    return recorded[0]


@pytest.fixture(scope="module")
def reports(
    recorded: tuple[dict[str, Path], dict[str, subprocess.CompletedProcess[str]]],
) -> dict[str, subprocess.CompletedProcess[str]]:
    """The recorded reports' processes, by name: the page is runs["dir"] / f"{name}.html"."""
    return recorded[1]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the module's page checks (its start is most of a check's cost); each page is still
    loaded in a browser context of its own, as a fresh browser would load it (report/browser.py)."""
    with Browser() as b:
        yield b


def _keep(shot: Path) -> None:
    dest = os.environ.get("DDTREE_TEST_ARTIFACTS")
    if dest:
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copy2(shot, Path(dest) / shot.name)


def _assert_clean(check: PageCheck, html: Path, charts: set[str]) -> None:
    assert check.requests == [html.resolve().as_uri()], check.requests  # the file itself and nothing else
    assert check.outside == [] and check.violations == [] and check.console_errors == []
    assert check.csp == CSP and "default-src 'none'" in CSP
    assert {c.id for c in check.charts} == charts
    for c in check.charts:
        assert c.drawn, c
    assert check.declared_charts == len(charts)
    assert check.ok
    assert check.screenshot is not None
    png = Path(check.screenshot).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    _keep(Path(check.screenshot))


@pytest.mark.browser
def test_report_of_one_recorded_run_in_a_browser(
    runs: dict[str, Path],
    reports: dict[str, subprocess.CompletedProcess[str]],
    tmp_path: Path,
    browser: Browser,
) -> None:
    html, p = runs["dir"] / "one.html", reports["one"]  # `report A --html one.html`
    assert p.returncode == 0, p.stderr
    # the terminal: the bench table, then the paired verdict against the baseline
    assert "SIMULATED" in p.stdout and "base" in p.stdout
    assert re.search(r"local/ddtree-shadow vs local/dflash \(baseline\), tok/s: .*95 % CI .*n=9\)", p.stdout)
    assert f"wrote {html}" in p.stderr
    text = html.read_text()
    for needle in ("SIMULATED", "REPLAY", "Manifest", "Per service", "Per prompt", "shadow-linear", "DDTREE"):
        assert needle in text
    assert "--algorithm ddtree" in text  # the effective argv of the simulated service
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/", "")
    check = check_page(html, tmp_path / "report-one-run.png", browser=browser)
    _assert_clean(check, html, ALL_CHARTS)
    assert check.text_chars > 1000


@pytest.mark.browser
def test_run_bench_html_is_the_same_report(runs: dict[str, Path], tmp_path: Path, browser: Browser) -> None:
    html = runs["dir"] / "a-direct.html"
    text = html.read_text()
    assert json.loads(runs["a"].read_text())["id"] in text
    check = check_page(html, tmp_path / "report-run-bench.png", browser=browser)
    _assert_clean(check, html, ALL_CHARTS)


@pytest.mark.browser
def test_two_run_comparison_in_the_terminal_and_a_browser(
    runs: dict[str, Path],
    reports: dict[str, subprocess.CompletedProcess[str]],
    tmp_path: Path,
    browser: Browser,
) -> None:
    html, p = runs["dir"] / "ab.html", reports["ab"]  # `report A B --html ab.html`
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("A = ") and "\nB = " in out
    assert "B vs A: comparable" in out and "NOT COMPARABLE" not in out
    # aligned: each service, all prompts then each prompt, with both runs' numbers and the delta's interval
    for svc in ("local/dflash", "local/ddtree-shadow"):
        for prompt in ("(all)", "fibonacci", "quicksort", "math"):
            assert re.search(rf"^{re.escape(svc)}\s+{re.escape(prompt)}\s+\d+\.\d ± ", out, re.M), (
                svc,
                prompt,
            )
    assert re.search(r"local/dflash\s+\(all\)\s+.*\(n=9\).*\(n=9\)\s+\S+ %\s+\S+ … \S+ %", out)
    text = html.read_text()
    assert "Aligned on service and prompt" in text and "comparable — same sampling" in text
    check = check_page(html, tmp_path / "report-two-runs.png", browser=browser)
    _assert_clean(check, html, ALL_CHARTS)


@pytest.mark.browser
def test_runs_not_comparable_say_so_and_get_the_load_chart(
    runs: dict[str, Path], tmp_path: Path, browser: Browser
) -> None:
    # a different sampling is named too (a copy of A with another max_new_tokens); both reports in one child
    raw = json.loads(runs["a"].read_text())
    raw["sampling"]["max_new_tokens"] = 512
    other = tmp_path / "a512.json"
    other.write_text(json.dumps(raw))
    html = tmp_path / "ac.html"
    p, p2 = cli_batch([["report", str(runs["a"]), str(runs["c"]), "--html", str(html)],
                       ["report", str(runs["a"]), str(other)]], tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "NOT COMPARABLE: B vs A: different load: concurrency 1 vs 3" in p.stdout
    assert "NOT COMPARABLE: B vs A: different sampling: max_new_tokens 24 vs 512" in p2.stdout
    text = html.read_text()
    assert "NOT COMPARABLE" in text
    check = check_page(html, tmp_path / "report-concurrency.png", browser=browser)
    _assert_clean(check, html, ALL_CHARTS | {"chart-load"})


class _Hits(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Hits.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[int]:
    _Hits.hits = []
    with serve_http(_Hits) as port:
        yield port


@pytest.mark.browser
def test_the_browser_check_can_fail(
    runs: dict[str, Path],
    reports: dict[str, subprocess.CompletedProcess[str]],
    tmp_path: Path,
    local_server: int,
    browser: Browser,
) -> None:
    assert reports["one"].returncode == 0  # the base page: `report A --html`, as the first test checks it
    page = (runs["dir"] / "one.html").read_text()
    img = f'<img src="http://127.0.0.1:{local_server}/leak.png" alt="">'
    # 1. with the report's CSP the browser refuses the load: a violation, and the server sees nothing
    blocked = tmp_path / "blocked.html"
    blocked.write_text(page.replace("<h1>", img + "<h1>", 1))
    c1 = check_page(blocked, browser=browser)
    assert not c1.self_contained and c1.violations and not c1.ok
    assert _Hits.hits == []
    # 2. without it the request shows in the network log (and really reaches the server)
    open_page = tmp_path / "open.html"
    open_page.write_text(
        re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page).replace("<h1>", img + "<h1>", 1)
    )
    c2 = check_page(open_page, browser=browser)
    assert c2.outside == [f"http://127.0.0.1:{local_server}/leak.png"] and not c2.ok
    assert _Hits.hits == ["/leak.png"]
    # 3. an empty chart is caught
    empty = tmp_path / "empty.html"
    empty.write_text(
        re.sub(
            r"(<figure class=\"chart\" id=\"chart-accept\"[^>]*>)<svg.*?</svg>",
            r"\1",
            page,
            count=1,
            flags=re.S,
        )
    )
    c3 = check_page(empty, browser=browser)
    assert c3.self_contained and not c3.charts_ok
    assert [c.id for c in c3.charts if not c.drawn] == ["chart-accept"]


def test_bad_inputs_name_the_file_and_exit_2(runs: dict[str, Path], tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = []
    missing = tmp_path / "missing.json"
    cases.append((missing, "no such file"))
    notjson = tmp_path / "notes.json"
    notjson.write_text("hello\n")
    cases.append((notjson, "not JSON"))
    hist = runs["dir"] / "history.jsonl"
    cases.append((hist, "a history file"))
    other = tmp_path / "status.json"
    other.write_text(json.dumps({"schema": 1, "hosts": []}))
    cases.append((other, "not a bench run"))
    future = tmp_path / "future.json"
    raw = json.loads(runs["a"].read_text())
    future.write_text(json.dumps({**raw, "schema": 2}))
    cases.append((future, "bench schema 2; this ddtree-tui reads schema 1"))
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**raw, "results": [{"service": "x"}]}))
    cases.append((broken, "not a valid bench run: results.0."))
    cases.append((tmp_path, "is a directory"))
    out = tmp_path / "never.html"
    # one child process for the seven command lines (tests/cli_batch.py: the imports paid once)
    done = cli_batch(
        [["report", str(runs["a"]), str(path), "--html", str(out)] for path, _ in cases], tmp_path
    )
    for (path, words), p in zip(cases, done, strict=True):
        assert p.returncode == 2, (path, p.stderr)
        assert f"ddtree-tui report: {path}: " in p.stderr and words in p.stderr, p.stderr
        assert p.stdout == "" and not out.exists()


def test_html_output_is_atomic_and_leaves_special_files_alone(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("old report")
    out.chmod(0o640)
    # the three command lines in one child process (tests/cli_batch.py), then what each left behind
    a, dev, d = cli_batch([["report", str(runs["a"]), "--html", x] for x in (str(out), os.devnull, str(tmp_path))],
                          tmp_path)  # fmt: skip
    assert a.returncode == 0, a.stderr
    assert out.read_text().startswith("<!DOCTYPE html>") and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.html"]  # no temp file left (by any of the three)
    assert dev.returncode == 0 and stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert d.returncode == 1 and f"cannot write {tmp_path}" in d.stderr

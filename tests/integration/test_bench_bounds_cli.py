"""`--run-bench` against what a user can give it (issue 25): counts past their bounds are usage errors that
name the option or the file, line and field; a run's JSON is streamed to disk, so an interrupted run leaves
a partial JSON that `report` reads; an output that cannot be written exits non-zero; a `$` in a prompt id
is drawn as it is in the HTML charts. Real files, a real simulated server, real child processes and signals."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ddtree_tui.bench import history, report
from ddtree_tui.bench.bounds import MAX_NEW_TOKENS, MAX_PROMPTS, MAX_RUN_REQUESTS, MAX_SESSIONS
from ddtree_tui.cli import main
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess
from tests.util import cli_argv, cli_batch

NOWHERE = "http://127.0.0.1:9"  # never contacted: every check here happens before the first request


def _prompts(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.slow
def test_a_prompt_file_past_the_bound_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "many.jsonl"
    with f.open("w") as out:
        for i in range(MAX_PROMPTS + 1):
            out.write(f'{{"id": "q{i}", "prompt": "question {i}"}}\n')
    assert main(["--run-bench", "--url", NOWHERE, "--prompts", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:{MAX_PROMPTS + 1}: more than {MAX_PROMPTS} prompts" in err and "Traceback" not in err


def test_a_run_past_a_million_requests_is_refused_before_it_plans_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _prompts(tmp_path / "p.jsonl", [{"prompt": f"q{i}"} for i in range(2000)])
    argv = ["--run-bench", "--url", NOWHERE, "--prompts", str(f), "--repeats", "1000"]
    assert main([*argv, "--history", str(tmp_path / "h.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"2000 prompts × 1000 repeats × 1 service(s) = 2000000 requests: at most {MAX_RUN_REQUESTS}" in err
    assert not (tmp_path / "h.jsonl").exists()  # nothing ran


def test_a_max_new_tokens_past_2_to_the_64_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _prompts(tmp_path / "p.jsonl", [{"prompt": "a"}, {"prompt": "b", "max_new_tokens": 2**64}])
    assert main(["--run-bench", "--url", NOWHERE, "--prompts", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:2: max_new_tokens {2**64}: must be a whole number 1…{MAX_NEW_TOKENS}" in err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--sessions", "100000"], f"--sessions 100000: must be a whole number 1…{MAX_SESSIONS}"),
        (["--sessions", "2", "--turns", "100000"], "--turns 100000: must be a whole number 1…1000"),
        (["--max-line-bytes", "12"], "--max-line-bytes 12: must be greater than or equal to 1024 bytes"),
        (["--max-response-bytes", "lots"], "--max-response-bytes 'lots': expected a size in bytes"),
    ],
)
def test_counts_past_their_bounds_are_usage_errors(
    extra: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--run-bench", "--url", NOWHERE, *extra]) == 2
    assert words in capsys.readouterr().err


@pytest.mark.slow
def test_an_unwritable_json_exits_1_and_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    out = blocker / "r.json"
    with SimProcess(SimConfig(decode_rate=2000, load_time=0)) as sim:
        argv = cli_argv("--run-bench", "--url", sim.base_url, "--warmup", "0", "--max-new-tokens", "4")
        argv += ["--json", str(out), "--history", str(tmp_path / "h.jsonl")]
        p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert f"cannot write {out}" in p.stderr
    assert len(history.load(tmp_path / "h.jsonl")) == 1  # what could be saved still was


@pytest.mark.slow
def test_a_run_stopped_by_sigint_leaves_a_partial_json_that_report_reads(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    with f.open("w") as w:
        for i in range(5000):
            w.write(f'{{"id": "q{i}", "prompt": "question {i}"}}\n')
    out, err = tmp_path / "r.json", tmp_path / "err.txt"
    with SimProcess(SimConfig(decode_rate=200, load_time=0)) as sim:
        argv = cli_argv("--run-bench", "--url", sim.base_url, "--prompts", str(f), "--warmup", "0")
        argv += [
            "--concurrency",
            "8",
            "--max-new-tokens",
            "4",
            "--json",
            str(out),
            "--csv",
            str(tmp_path / "r.csv"),
        ]
        argv += ["--history", str(tmp_path / "h.jsonl")]
        with err.open("w") as ef:
            proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=ef)
            try:
                deadline = time.monotonic() + 60
                while "[20/5000]" not in err.read_text() and time.monotonic() < deadline:
                    time.sleep(0.05)
                proc.send_signal(signal.SIGINT)
                rc = proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    assert rc == 130, err.read_text()
    run = report.from_json(out.read_text())
    assert run.status == "interrupted" and 20 <= len(run.results) < 5000
    assert not list(tmp_path.glob(".r.json.*"))  # the temp file was renamed, none left behind
    rep = subprocess.run(cli_argv("report", str(out)), capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert run.id in rep.stdout or "interrupted" in rep.stdout


@pytest.mark.slow
def test_a_dollar_in_a_prompt_id_is_drawn_as_it_is_in_the_html(tmp_path: Path) -> None:
    ids = ["$_$", "p$\\frac$", "$$"]  # each one made matplotlib's mathtext parser raise
    f = _prompts(tmp_path / "p.jsonl", [{"id": i, "prompt": f"say {n}"} for n, i in enumerate(ids)])
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    with SimProcess(SimConfig(decode_rate=2000, load_time=0)) as sim:
        argv = ["--run-bench", "--url", sim.base_url, "--prompts", str(f), "--warmup", "0"]
        argv += ["--max-new-tokens", "4", "--json", str(out), "--history", str(tmp_path / "h.jsonl")]
        # the run and its report in one child process (tests/cli_batch.py: the imports paid once)
        p, rep = cli_batch([argv, ["report", str(out), "--html", str(html)]], tmp_path, timeout=180)
    assert p.returncode == 0, p.stderr
    assert rep.returncode == 0, rep.stderr
    page = html.read_text()
    assert "<svg" in page and "$_$" in page and "p$\\frac$" in page

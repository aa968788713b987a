"""`ddtree-tui report a.json load.json …`: every run kind this version writes (a plain run, schema 1; load,
soak and agentic runs, schema 2) is read back beside the others, never refused for its schema (issue 29)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.metrics import summarize
from ddtree_tui.bench.models import (
    BenchRun,
    BenchTarget,
    PromptInfo,
    RequestResult,
    SamplingParams,
    TargetInfo,
)
from ddtree_tui.bench.results import AgenticRun, AnyRun, LoadRun, SoakRun, TurnResult
from tests.util import cli_argv, cli_batch

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _plain(run_id: str) -> BenchRun:
    t = BenchTarget(ref="h/a", base_url="http://127.0.0.1:1", algorithm="dflash", mode="linear")
    results = [
        RequestResult(service="h/a", algorithm="dflash", mode="linear", prompt_id="p", repeat=i, seq=i,
                      started_at=0.0, tok_s=100.0 + i, ttft_s=0.03, e2e_s=0.6, output_tokens=64)
        for i in range(3)
    ]  # fmt: skip
    rows, summary = summarize(results, [t], ["p"], None, {"h/a": 2.0})
    return BenchRun(
        id=run_id, started_at=T0, prompt_set="seed3", prompts=[PromptInfo(id="p", title="p", approx_tokens=9)],
        sampling=SamplingParams(), repeats=3, warmup=0, concurrency=1, results=results, rows=rows,
        summary=summary, targets=[TargetInfo(ref="h/a", base_url=t.base_url, algorithm="dflash", mode="linear")],
    )  # fmt: skip


def _write(d: Path, name: str, run: AnyRun) -> str:
    p = d / name
    p.write_text(run.model_dump_json(by_alias=True, indent=1) + "\n")
    return str(p)


def _report(d: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv("report", *files), cwd=d, capture_output=True, text=True, timeout=60)


def test_report_reads_a_plain_run_beside_load_soak_and_agentic_runs(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json", _plain("plain-a"))
    b = _write(tmp_path, "b.json", _plain("plain-b"))
    load = _write(tmp_path, "load.json", LoadRun(id="ld1", started_at=T0, load=parse_load("sync"),
                                                 load_text="sync", prompt_set="seed3"))  # fmt: skip
    soak = _write(tmp_path, "soak.json", SoakRun(id="sk1", started_at=T0, load_text="sync", concurrency=1,
                                                 duration_s=60, window_s=10, prompt_set="seed3"))  # fmt: skip
    turns = [TurnResult(session="s0", service="h/a", turn=1, ok=True, ttft_ms=30.0, output_tokens=9)]
    agentic = _write(tmp_path, "ag.json", AgenticRun(id="ag1", started_at=T0, source="agentic", sessions=1,
                                                     turns=1, think_time_s=0, turns_results=turns))  # fmt: skip

    # the three reports in one child process (tests/cli_batch.py: the imports paid once)
    p, p2, p3 = cli_batch([["report", a, load], ["report", a, b, load, soak, agentic], ["report", load, soak]],
                          tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "schema" not in p.stderr
    assert "plain-a" in p.stdout and f"{load}: load run ld1" in p.stdout and "load ld1" in p.stdout

    p = p2
    assert p.returncode == 0, p.stderr
    assert "plain-a" in p.stdout and "plain-b" in p.stdout
    assert "load ld1" in p.stdout and "soak sk1" in p.stdout and "agentic ag1" in p.stdout

    p = p3  # two schema-2 runs, no plain one
    assert p.returncode == 0, p.stderr
    assert "load ld1" in p.stdout and "soak sk1" in p.stdout


def test_report_still_names_a_file_that_is_no_run(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json", _plain("plain-a"))
    load = _write(tmp_path, "load.json", LoadRun(id="ld1", started_at=T0, load=parse_load("sync"),
                                                 load_text="sync", prompt_set="seed3"))  # fmt: skip
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}\n')
    p = _report(tmp_path, a, load, str(junk))
    assert p.returncode == 2 and "junk.json: not a bench run" in p.stderr

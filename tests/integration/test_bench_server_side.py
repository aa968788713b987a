"""Issue 26 through `--run-bench --demo` (the fleet launches the profile's simulated services as child
processes; every request and scrape a real socket): a plain run with `--slice`, `--server-metrics` and
`--flush-cache` in JSON, CSV and HTML, one service with /metrics on and one without (its figures from the
Decode batch log the fleet follows); an open-loop ladder stopped by the statistical over-saturation test;
a soak and agentic sessions; the fleet's flush for the sweep; usage errors for options that do not fit."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.fleet import Fleet
from tests.fixtures.services.support import cleanup_workdir
from tests.util import cli_argv, cli_batch, free_port


def _profile(tmp_path: Path, services: list[tuple[str, str]]) -> Path:
    """(name, extra TOML lines of its [service.sim] table / a `extra_args = [...]` line before it)."""
    svc = ""
    for name, extra in services:
        args, _, sim = extra.partition("|")
        svc += f'[[service]]\nname = "{name}"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {free_port()}\n'
        svc += args + "\n"
        svc += f"[service.sim]\naccept_length = 3.0\ndecode_rate = 80.0\nload_time = 0.1\nseed = 1\n{sim}\n\n"
    p = tmp_path / "p.toml"
    p.write_text(f'name = "local"\naddress = "local"\npython = {json.dumps(sys.executable)}\n\n{svc}')
    return p


def _cli(tmp_path: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = cli_argv("--run-bench", "--demo", "--profile", str(profile), "--max-new-tokens", "16")
    argv += ["--history", str(tmp_path / "h.jsonl"), *args]
    return subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=dict(os.environ)
    )


@pytest.mark.slow
def test_plain_run_with_slices_server_metrics_and_cache_flush(tmp_path: Path) -> None:
    prof = _profile(
        tmp_path, [("a", ""), ("b", 'extra_args = ["--no-metrics", "--decode-log-interval", "2"]')]
    )
    out, sl, page = tmp_path / "run.json", tmp_path / "slices.csv", tmp_path / "run.html"
    p = _cli(
        tmp_path, prof, "--repeats", "4", "--concurrency", "2", "--slice", "1s", "--server-metrics",
        "--server-metrics-every", "0.25", "--flush-cache", "--json", str(out), "--slices-csv", str(sl),
        "--html", str(page),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    # the cache reset before the run, one per service, through the same route as the requests
    flushes = {f["service"]: f for f in doc["cache_flushes"]}
    assert set(flushes) == {"local/a", "local/b"}
    assert all(f["ok"] and f["status"] == 200 and f["endpoint"] == "/flush_cache" for f in flushes.values())
    assert all(f["before"] == "run" for f in flushes.values())
    # slices: 1 s windows over the run; every counted request in exactly one window, per service
    assert doc["slices"]["width_s"] == 1.0 and doc["slices"]["basis"] == "finished"
    rows = doc["slices"]["rows"]
    for svc in ("local/a", "local/b"):
        mine = [r for r in rows if r["service"] == svc]
        assert sum(r["n"] + r["failed"] for r in mine) == sum(
            1 for r in doc["results"] if r["service"] == svc
        )
        assert all(r["end_s"] - r["start_s"] <= 1.0 + 1e-9 for r in mine)
    # server metrics: a from its /metrics, b from its Decode batch log (its /metrics answers 404)
    sm = {m["service"]: m for m in doc["server_metrics"]}
    assert sm["local/a"]["source"] == "prometheus" and sm["local/a"]["scrapes"] >= 2
    assert sum(w["requests"] or 0 for w in sm["local/a"]["windows"]) >= sum(
        1 for r in doc["results"] if r["service"] == "local/a"
    )  # the warm-up is the server's request too
    assert sm["local/b"]["source"] == "decode-log" and "404" in sm["local/b"]["note"]
    assert sm["local/b"]["log_lines"] > 0
    assert any(w["running_reqs_max"] for w in sm["local/b"]["windows"])
    # the CSV: the client's and the server's columns of each window, joined
    with sl.open() as f:
        lines = list(csv.DictReader(f))
    assert len(lines) == len(rows) and {x["run_id"] for x in lines} == {doc["id"]}
    assert {x["server_source"] for x in lines if x["service"] == "local/a"} == {"prometheus"}
    assert {x["server_source"] for x in lines if x["service"] == "local/b"} <= {"decode-log"}
    # stdout: the slices table after the run's; the HTML: its sections
    assert "time slices (by finish time):" in p.stdout and "server metrics local/b: decode-log" in p.stdout
    html = page.read_text()
    for h in ("<h2>Time slices</h2>", "<h2>Server metrics</h2>", "<h2>Cache flushes</h2>"):
        assert h in html
    assert "<script" not in html


@pytest.mark.slow
def test_open_loop_ladder_stopped_by_the_trend_test(tmp_path: Path) -> None:
    # one running slot: about 15 requests/s of 16 tokens at 80 passes/s × 3 tokens; 30 req/s piles them up,
    # 5 req/s (a request every 200 ms, each served in about 70) never overlaps two. No warm-up (a level's
    # warm-up, as many requests as its rate, is not what is tested). 40 requests a level, the trend test on the
    # last 20: the saturated level's sends must span over a second, or one scheduling stall of a busy machine
    # at its end (~0.1 s) leaves it under 90 % of its rate, "not reached", and never used to stop the ladder
    # (20 requests at 40 req/s, 0.475 s: sent 33.2 of 40 req/s in a loaded run)
    prof = _profile(tmp_path, [("a", "|max_running_requests = 1")])
    out = tmp_path / "load.json"
    p = _cli(
        tmp_path, prof, "--load", "rate:5,30,80", "--requests", "40", "--warmup", "0", "--saturation-test", "trend",
        "--saturation-window", "20", "--flush-cache", "--json", str(out), "--html", str(tmp_path / "load.html"),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    labels = [lv["label"] for lv in doc["levels"]]
    assert labels == ["5 req/s", "30 req/s"], doc["levels"][-1]["services"]  # 80 req/s never ran
    tests = {t["level"]: t for t in doc["saturation_tests"]}
    assert not tests["5 req/s"]["tripped"]
    t = tests["30 req/s"]
    assert t["tripped"] and t["method"] == "mann-kendall" and t["alpha"] == 0.05 and t["window"] == 20
    assert t["in_flight"]["p_value"] < 0.05 and t["ttft"]["p_value"] < 0.05
    assert t["window_end_s"] > t["window_start_s"] > 0
    assert doc["stopped"].startswith("saturated at 30 req/s") and "over-saturated" in doc["stopped"]
    # a flush before the run and before the second level (none before a level that never ran)
    assert [f["before"] for f in doc["cache_flushes"]] == ["run", "level 30 req/s"]
    page = (tmp_path / "load.html").read_text()
    assert "<h2>Over-saturation test</h2>" in page and "TRIPPED" in page and "<h2>Cache flushes</h2>" in page


@pytest.mark.slow
def test_options_that_do_not_fit_are_usage_errors(tmp_path: Path) -> None:
    prof = _profile(tmp_path, [("a", "")])
    base = ["--run-bench", "--demo", "--profile", str(prof), "--max-new-tokens", "16"]
    base += [
        "--history",
        str(tmp_path / "h.jsonl"),
    ]  # the three command lines in one child (tests/cli_batch.py)
    p, q, r = cli_batch(
        [[*base, "--saturation-test", "trend"], [*base, "--slice", "0s"],
         [*base, "--soak", "--duration", "4s", "--window", "2s", "--slice", "1s"]],
        tmp_path,
    )  # fmt: skip
    assert p.returncode == 2 and "are for --load ladders" in p.stderr
    assert q.returncode == 2 and "--slice" in q.stderr
    assert r.returncode == 2 and "--slice on a soak is its --window" in r.stderr


@pytest.mark.slow
def test_soak_and_agentic_runs_get_server_figures_and_slices(tmp_path: Path) -> None:
    prof = _profile(tmp_path, [("a", "")])
    soak, ag = tmp_path / "soak.json", tmp_path / "ag.json"
    base = ["--run-bench", "--demo", "--profile", str(prof), "--max-new-tokens", "16"]
    base += ["--history", str(tmp_path / "h.jsonl")]
    # the soak, then the agentic sessions, in one child process (tests/cli_batch.py: the imports paid once;
    # each run starts and stops the profile's simulator through its own fleet)
    p, p2 = cli_batch(
        [[*base, "--soak", "--duration", "2s", "--slice", "1s", "--server-metrics", "--server-metrics-every", "0.25",
          "--flush-cache", "--json", str(soak)],
         [*base, "--sessions", "2", "--turns", "2", "--prompts", "agentic", "--slice", "1s", "--server-metrics",
          "--json", str(ag), "--slices-csv", str(tmp_path / "ag.csv")]],
        tmp_path, timeout=180,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(soak.read_text())
    assert doc["window_s"] == 1.0 and "slices" not in doc  # a soak's slices are its windows, stored once
    [sm] = doc["server_metrics"]
    assert sm["source"] == "prometheus"
    assert [(w["index"], w["start_s"], w["end_s"]) for w in sm["windows"]] == [
        (w["index"], w["start_s"], w["end_s"]) for w in doc["windows"]
    ]  # cut by the soak's own windows
    assert sum(w["requests"] or 0 for w in sm["windows"]) >= sum(w["metrics"]["n"] for w in doc["windows"])
    assert [f["before"] for f in doc["cache_flushes"]] == ["run"] and doc["cache_flushes"][0]["ok"]
    assert "time slices (soak windows):" in p.stdout
    assert p2.returncode == 0, p2.stderr
    doc = json.loads(ag.read_text())
    assert all(t["started_at"] for t in doc["turns_results"])
    assert sum(r["n"] for r in doc["slices"]["rows"]) == len(doc["turns_results"]) == 4
    assert doc["server_metrics"][0]["source"] == "prometheus"
    assert (tmp_path / "ag.csv").read_text().count("\n") == 1 + len(doc["slices"]["rows"])


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_the_fleet_flushes_a_service_for_the_sweep(tmp_path: Path) -> None:
    """Fleet.flush_cache, the sweep's call before each point, through the desk's route to the service."""
    wd = tmp_path / "wd"
    svc = (
        f'[[service]]\nname = "a"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {free_port()}\n'
        "startup_timeout = 30\n[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    )
    prof = parse_profile(f'name = "h"\naddress = "local"\nworkdir = "{wd}"\n{svc}')
    fleet = Fleet([prof], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl", telemetry=False,
                  probe_interval=0.3)  # fmt: skip
    try:
        await fleet.start()
        assert (await fleet.launch("h/a")).ok
        assert (await fleet.wait_service("h/a", {"ready", "crashed", "stopped"}, 60)).state == "ready"
        [rec] = await fleet.flush_cache(["h/a"], "point 1")
    finally:
        await fleet.stop()
        cleanup_workdir(wd)
    assert rec.ok and rec.service == "h/a" and rec.before == "point 1" and rec.endpoint == "/flush_cache"

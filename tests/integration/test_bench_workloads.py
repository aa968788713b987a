"""Workloads of issue 26 through real sockets against the simulator in a child process: a mooncake trace
replayed at its timestamps whose shared hash-id prefixes hit the server's prefix cache, bursty gamma
arrivals under a concurrency cap, a ramp, client cancellation that the server logs as an abort, and the
same through `--run-bench` (JSON and HTML)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from ddtree_tui.bench.load import parse_load
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.models import BenchRequest, BenchTarget, ShapeRequest
from ddtree_tui.bench.runner import run_bench
from ddtree_tui.bench.workloads import arrivals
from ddtree_tui.bench.workloads.trace import load_trace
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import SimProcess
from tests.util import cli_batch, free_port

SAMPLE = Path(__file__).resolve().parents[2] / "ddtree_tui" / "data" / "mooncake-sample.jsonl"


def _sim(**kw: object) -> SimProcess:
    return SimProcess(SimConfig.realistic(algorithm="dflash", port=free_port(), accept_length=3.0, **kw))


@pytest.mark.slow
def test_trace_replay_hits_the_prefix_cache_and_records_its_schedule() -> None:
    with _sim(decode_rate=400.0) as sim:
        t = BenchTarget(ref="h/spec", base_url=sim.base_url, algorithm="dflash", mode="linear")
        req = ShapeRequest(trace=str(SAMPLE), load="trace:8", max_new_tokens=64, ignore_eos=True, seed=3)
        run = asyncio.run(run_load(req, [t], parse_load("trace:8"), LoadSettings()))
    tr = load_trace(SAMPLE)
    assert run.status == "complete" and run.failed == 0 and len(run.results) == 24
    w = run.workload
    assert w is not None and w.trace is not None and w.seed == 3 and w.prompts == f"trace:{SAMPLE}"
    assert w.trace.sha256 == tr.sha256 and w.trace.requests == 24 and w.trace.speed == 8
    assert w.trace.planned_duration_s == pytest.approx(tr.offsets(8)[-1])
    [s] = w.schedules
    assert s.planned == s.sent == 24 and s.on_time + s.late == 24 and s.lag_ms_max is not None
    assert s.planned_rate == s.offered_rate == pytest.approx(23 / tr.offsets(8)[-1])
    # every prompt as long as its record says, its output length the record's
    by_id = {r.prompt_id: r for r in run.results}
    for i, rec in enumerate(tr.records):
        r = by_id[f"trace-{i}-l{rec.line}"]
        assert r.prompt_tokens == rec.input_length and r.output_tokens == rec.output_length
    # shared leading hash ids hit the server's prefix cache (the server's figure, per request, summed)
    hit = w.trace.cached_tokens["h/spec"]
    assert hit == sum(r.cached_tokens or 0 for r in run.results)
    ideal = tr.ideal_hit_tokens()
    assert 0.9 * ideal <= hit <= ideal  # whole 16-token pages of the blocks seen before
    assert by_id["trace-1-l2"].cached_tokens == 3 * 512  # line 2 starts with line 1's three blocks


@pytest.mark.slow
def test_gamma_with_a_cap_ramp_and_cancellation_seen_by_the_server() -> None:
    with _sim(decode_rate=100.0) as sim:
        t = BenchTarget(ref="h/spec", base_url=sim.base_url, algorithm="dflash", mode="linear")
        req = ShapeRequest(
            prompts="gsp:2,4,128,16", max_new_tokens=80, ignore_eos=True, warmup=0, seed=11,
            load="gamma:20,0.5", max_concurrency=3, cancel="0.5,0.15",
        )  # fmt: skip
        run = asyncio.run(run_load(req, [t], parse_load("gamma:20,0.5"), LoadSettings(requests=12)))
        ramp = parse_load("ramp:linear,4,12,1s")
        req2 = ShapeRequest(prompts="seed3", max_new_tokens=8, warmup=0, load=ramp.text)
        run2 = asyncio.run(run_load(req2, [t], ramp, LoadSettings()))
        log = sim.output()
    w = run.workload
    assert w is not None and w.cancel == "0.5,0.15" and w.max_concurrency == 3
    [s] = w.schedules
    assert s.planned == s.sent == 12 and s.max_in_flight is not None and s.max_in_flight <= 3
    assert s.offered_rate == 20 and s.planned_rate is not None and s.achieved_rate is not None
    [c] = w.cancels
    # a request takes about a second (80 tokens at 100 tok/s, a third of the steps): none ends in 0.15 s
    assert c.picked >= 1 and c.cancelled == c.picked and c.finished_first == 0
    assert len(w.cancelled) == c.cancelled and all(x.delay_s == 0.15 for x in w.cancelled)
    # counted apart: not failed, not in the results or the latency statistics
    assert run.failed == 0 and len(run.results) == 12 - c.cancelled
    assert run.levels[0].services[0].n == 12 - c.cancelled
    assert not {x.seq for x in w.cancelled} & {r.seq for r in run.results}
    # the server saw each one go
    assert log.count("Abort request rid=") >= c.cancelled and "disconnected from the client side" in log
    # the ramp: its schedule planned in full and sent, offered = its planned mean rate
    [s2] = run2.workload.schedules if run2.workload else []
    planned = list(arrivals.ramp_offsets(ramp.ramp))  # type: ignore[arg-type]
    assert s2.planned == s2.sent == len(planned) == len(run2.results)
    assert run2.levels[0].services[0].offered_rate == pytest.approx(arrivals.planned_rate(planned))
    assert run2.levels[0].label == "ramp 4→12 req/s"


@pytest.mark.slow
def test_a_seed_gives_every_service_the_same_arrivals_and_cancellations() -> None:
    with _sim(decode_rate=100.0) as sim:
        ts = [
            BenchTarget(ref=f"h/{x}", base_url=sim.base_url, algorithm="dflash", mode="linear") for x in "ab"
        ]
        req = ShapeRequest(
            prompts="gsp:2,3,64,8", max_new_tokens=40, ignore_eos=True, warmup=0, seed=5,
            load="gamma:30,0.5", cancel="0.4,0.1",
        )  # fmt: skip
        run = asyncio.run(run_load(req, ts, parse_load("gamma:30,0.5"), LoadSettings(requests=10)))
    w = run.workload
    assert w is not None and run.rounds == 2
    picked = {c.service: c.picked for c in w.cancels}
    assert picked["h/a"] == picked["h/b"] >= 1  # the same draws in each round for both services
    gone = {ref: sorted(x.prompt_id for x in w.cancelled if x.service == ref) for ref in ("h/a", "h/b")}
    assert gone["h/a"] == gone["h/b"]
    sent = {ref: sorted(r.prompt_id for r in run.results if r.service == ref) for ref in ("h/a", "h/b")}
    assert sent["h/a"] == sent["h/b"]  # the same prompts, in the same order of draws
    plans = {s.service: (s.planned, s.planned_rate) for s in w.schedules}
    assert plans["h/a"] == plans["h/b"]  # the same planned schedule (its own rate, from the same gaps)


@pytest.mark.slow
def test_sharegpt_plain_run_takes_its_output_lengths_from_the_gpt_turns(tmp_path: Path) -> None:
    f = tmp_path / "sg.json"
    rows = [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": f"question {i}"},
                {"from": "gpt", "value": "w" * (8 * (i + 1))},
            ],
        }
        for i in range(3)
    ]
    f.write_text(json.dumps(rows))
    with _sim(decode_rate=400.0) as sim:
        t = BenchTarget(ref="h/spec", base_url=sim.base_url, algorithm="dflash", mode="linear")
        req = BenchRequest(prompts=f"sharegpt:{f},gpt-len", ignore_eos=True, warmup=0, seed=2)
        run = asyncio.run(run_bench(req, [t]))
    assert run.status == "complete" and run.failed == 0 and run.prompt_set == f"sharegpt:{f},gpt-len"
    assert run.seed == 2
    # the gpt reply of 8·(i+1) characters sets 2·(i+1) output tokens, through the server and back
    assert {r.prompt_id: r.output_tokens for r in run.results} == {f"c{i}-{i}": 2 * (i + 1) for i in range(3)}
    assert {p.id for p in run.prompts} == {"c0-0", "c1-1", "c2-2"}


def _profile(tmp_path: Path) -> Path:
    p = tmp_path / "p.toml"
    p.write_text(
        f'name = "local"\naddress = "local"\npython = {json.dumps(sys.executable)}\n\n'
        f'[[service]]\nname = "a"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {free_port()}\n'
        "[service.sim]\naccept_length = 3.0\ndecode_rate = 300.0\nload_time = 0.1\n"
    )
    return p


@pytest.mark.slow
def test_run_bench_trace_headless_json_and_html(tmp_path: Path) -> None:
    out, html = tmp_path / "t.json", tmp_path / "t.html"
    bad = tmp_path / "bad.jsonl"  # a bad trace line: named, nothing run (checked at the end)
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": -1}\n')
    # the run and the bad trace in one child process (tests/cli_batch.py: the imports paid once)
    p, q = cli_batch(
        [["--run-bench", "--demo", "--profile", str(_profile(tmp_path)), "--history", str(tmp_path / "h.jsonl"),
          "--trace", str(SAMPLE), "--trace-speed", "10", "--max-concurrency", "8", "--cancel", "0.2,0.05",
          "--seed", "4", "--json", str(out), "--html", str(html)],
         ["--run-bench", "--url", "http://127.0.0.1:9", "--trace", str(bad)]],
        tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "load" and doc["load_text"] == "trace:10"
    w = doc["workload"]
    assert w["seed"] == 4 and w["max_concurrency"] == 8 and w["trace"]["requests"] == 24
    [s] = w["schedules"]
    [c] = w["cancels"]
    assert s["sent"] == 24 and len(doc["results"]) + c["cancelled"] == 24 and doc["failed"] == 0
    assert w["trace"]["cached_tokens"]["local/a"] > 0
    assert "prefix-cache hit tokens reported by the server" in p.stdout and "on time" in p.stdout
    page = html.read_text()
    assert "Workload" in page and "prefix-cache hit tokens" in page and "cancelled by the client" in page
    # a bad trace line: named, nothing run
    assert q.returncode == 2 and f"{bad}:1: output_length -1" in q.stderr

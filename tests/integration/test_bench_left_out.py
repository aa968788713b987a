"""One rule for every bench path (issue 29): a service the fleet sees stopped is left out, with a word, of a
plain run and of a load-shape run alike, even when something else answers on its port; nothing left: the
run is refused in words. Through a real Fleet on a local profile, with real simulated servers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ddtree_tui.bench.models import BenchRequest, ShapeRequest
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.config import load_profiles
from ddtree_tui.fleet import Fleet
from ddtree_tui.fleet.benching import BenchRefused
from ddtree_tui.model.events import FleetEvent, Notice
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer
from tests.util import cli_batch, local_profile

PROMPTS = [Prompt(id="p0", messages=[{"role": "user", "content": "question"}])]


def _profile(tmp_path: Path, up_port: int, down_port: int) -> Path:
    return local_profile(tmp_path, [("up", "external", up_port), ("down", "sim", down_port)])


def _words(q: asyncio.Queue[FleetEvent]) -> list[str]:
    out = []
    while not q.empty():
        ev = q.get_nowait()
        if isinstance(ev, Notice):
            out.append(ev.text)
    return out


@pytest.mark.timeout(90)
async def test_a_stopped_service_is_left_out_with_a_word_in_plain_and_load_runs(tmp_path: Path) -> None:
    cfg = SimConfig(algorithm="dflash", decode_rate=2000, load_time=0)
    # `down` was never launched (no pidfile: stopped), yet a foreign server answers on its port
    async with SimServer(cfg, log=lambda s: None) as up, SimServer(cfg, log=lambda s: None) as foreign:
        profiles = load_profiles([_profile(tmp_path, up.port, foreign.port)])
        hist = tmp_path / "h.jsonl"
        async with Fleet.open(profiles, telemetry=False, watch=False, history_path=hist) as fleet:
            await fleet.wait_settled(10)
            q = fleet.subscribe()
            refs = ["loc/up", "loc/down"]
            plain = await fleet.run_bench(
                BenchRequest(refs=refs, prompts=PROMPTS, warmup=0, max_new_tokens=8)
            )
            assert [t.ref for t in plain.targets] == ["loc/up"]
            assert {r.service for r in plain.results} == {"loc/up"} and plain.failed == 0
            assert "loc/down left out: the service is stopped" in _words(q)

            shape = ShapeRequest(refs=refs, prompts=PROMPTS, warmup=0, max_new_tokens=8, requests=2)
            load = await fleet.run_load_shape(shape)
            assert load.kind == "load" and [t.ref for t in load.targets] == ["loc/up"]
            assert {r.service for r in load.results} == {"loc/up"}
            assert "loc/down left out: the service is stopped" in _words(q)

            with pytest.raises(BenchRefused, match="nothing to benchmark"):
                await fleet.run_load_shape(shape.model_copy(update={"refs": ["loc/down"]}))
            with pytest.raises(BenchRefused, match="nothing to benchmark"):
                await fleet.run_bench(BenchRequest(refs=["loc/down"], prompts=PROMPTS))
            assert "loc/down left out: the service is stopped" in _words(q)
    assert [
        h["kind"] if "kind" in h else "plain" for h in map(json.loads, hist.read_text().splitlines())
    ] == [
        "plain",
        "load",
    ]


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_run_bench_says_which_service_it_left_out(tmp_path: Path) -> None:
    """The same rule at the level a user sees it: `--run-bench` (plain and --load) names the stopped service
    on stderr, measures the other, and measures nothing when only the stopped one is named."""
    cfg = SimConfig(algorithm="dflash", decode_rate=2000, load_time=0)
    async with SimServer(cfg, log=lambda s: None) as up, SimServer(cfg, log=lambda s: None) as foreign:
        prof = _profile(tmp_path, up.port, foreign.port)
        base = ["--run-bench", "--profile", str(prof), "--warmup", "0", "--max-new-tokens", "8"]
        base += ["--history", str(tmp_path / "h.jsonl")]
        # the three command lines in one child process (tests/cli_batch.py: the imports paid once), in a
        # thread: the simulators answer from this test's event loop
        extras = ([], ["--load", "sync", "--requests", "2"])
        outs = [tmp_path / f"r{i}.json" for i in range(len(extras))]
        *runs, none = await asyncio.to_thread(
            cli_batch,
            [*([*base, "--services", "loc/up,loc/down", "--json", str(o), *e] for o, e in zip(outs, extras, strict=True)),
             [*base, "--services", "loc/down"]],
            tmp_path,
        )  # fmt: skip
        for p, out in zip(runs, outs, strict=True):
            assert p.returncode == 0, p.stderr
            assert "loc/down left out: the service is stopped" in p.stderr
            assert [t["ref"] for t in json.loads(out.read_text())["targets"]] == ["loc/up"]
        assert none.returncode == 1 and "nothing to benchmark" in none.stderr, none.stderr
        assert "loc/down left out" in none.stderr

"""The client sizes its own worker processes (issue 26): `--workers auto` plans the chunk rate from the
warm-up (streams in flight × one stream's chunks/s), one process per PER_WORKER_CHUNKS_S, at most the usable
cores but one and the streams in flight; `--workers N` overrides; the run's JSON says how many and why."""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ddtree_tui.bench import BenchRequest, BenchTarget
from ddtree_tui.bench.load import LoadSpec
from ddtree_tui.bench.loadrun import LoadSettings, run_load
from ddtree_tui.bench.models import PromptFinished, RequestResult
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.runner import RunHooks, run_bench
from ddtree_tui.bench.worker import (
    PER_WORKER_CHUNKS_S,
    PER_WORKER_STREAMS,
    plan_workers,
    quiet_gc,
    stream_chunk_rate,
    usable_cores,
)
from ddtree_tui.cli import _workers_arg
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer


def test_the_plan_gives_a_process_to_each_share_of_the_chunk_rate_up_to_the_cores() -> None:
    assert plan_workers(3, 64, 250.0, cores=16) == (3, "--workers 3")  # asked: taken as it is
    per = PER_WORKER_CHUNKS_S
    n, why = plan_workers(0, 16, 4 * per / 16, cores=16)  # 4 shares of chunks, streams for one process
    assert n == 4 and why.startswith(f"auto: 16 streams × {4 * per / 16:.0f} chunks/s")
    n, why = plan_workers(0, 4 * PER_WORKER_STREAMS, per / 1000, cores=16)  # few chunks, 4 shares of streams
    assert n == 4 and f"per {PER_WORKER_STREAMS:g} streams" in why
    n, why = plan_workers(0, 256, 250.0, cores=2)  # wants 16 (256 streams: 16 shares of 16), has 2 cores
    assert n == 1 and "wanted 16; 2 usable cores, one left for the rest" in why  # one core left over
    n, why = plan_workers(0, 256, 250.0, cores=8)
    assert n == 7 and "wanted 16; 8 usable cores, one left for the rest" in why
    assert plan_workers(0, 256, 250.0, cores=1)[0] == 1  # one core: this process alone
    assert plan_workers(0, 1, 1e9, cores=16)[0] == 1  # never more processes than streams in flight
    assert plan_workers(0, 4, 10.0, cores=16)[0] == 1  # a slow stream needs no second process
    n, why = plan_workers(0, 64, None, cores=16)
    assert n == 1 and "no warm-up stream" in why
    assert usable_cores() >= 1


def _res(chunks: int, ttft: float, e2e: float, ok: bool = True) -> RequestResult:
    return RequestResult(
        service="s", algorithm="a", mode=None, prompt_id="p", repeat=0, seq=0, started_at=0.0,
        ok=ok, chunks=chunks, ttft_s=ttft, e2e_s=e2e,
    )  # fmt: skip


def test_the_chunk_rate_is_a_streams_chunks_after_the_first_over_its_time_after_the_first() -> None:
    rs = [_res(251, 0.02, 1.02), _res(101, 0.5, 1.5), _res(300, 0.1, 0.2, ok=False), _res(1, 0.1, 0.1)]
    assert stream_chunk_rate(rs) == pytest.approx(175.0)  # median of 250 and 100; failed and 1-chunk left out
    assert stream_chunk_rate([]) is None


def test_workers_is_auto_or_a_number() -> None:
    assert _workers_arg("auto") == "auto" and _workers_arg("AUTO") == "auto" and _workers_arg("4") == 4
    with pytest.raises(argparse.ArgumentTypeError, match="a number of processes or auto"):
        _workers_arg("four")


def test_quiet_gc_restores_the_collector() -> None:
    gc.unfreeze()  # this worker's earlier tests may have run an app, which freezes its heap
    before = gc.get_threshold()
    with quiet_gc():
        assert gc.get_threshold()[0] >= 50_000 and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_quiet_gc_leaves_a_heap_frozen_before_it_frozen() -> None:
    """The TUI freezes its heap after its start and runs its own collection policy (ui/gcpolicy.py); a bench
    run inside it must not unfreeze it at its end, nor raise its young threshold (young collections of
    77-99 ms inside the app)."""
    marker: list[list[int]] = [[]]  # a container the collector tracks
    gc.freeze()
    before = gc.get_threshold()
    try:
        with quiet_gc():
            assert gc.get_threshold() == before
        # still in the permanent generation (an unfreeze would put it back among the collector's objects);
        # the freeze count itself moves as frozen objects die by their reference counts
        assert not any(o is marker for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is marker for o in gc.get_objects())


def test_quiet_gc_sets_its_policy_over_a_headless_modes_frozen_imports() -> None:
    """`--run-bench` freezes its imports (lib/heap.py, no collection first): unlike an app's frozen heap,
    that is no policy to keep, so a run still raises the young threshold, and a run nested in it (the
    freeze is now the run's) keeps the outer one's."""
    from ddtree_tui.lib import heap

    gc.unfreeze()
    before = gc.get_threshold()
    heap.freeze_imports()
    try:
        assert gc.get_freeze_count() > 0 and not heap.frozen_by_app()
        with quiet_gc():
            raised = gc.get_threshold()
            assert raised[0] >= 50_000 and heap.frozen_by_app()
            with quiet_gc():  # nested: left as the outer run set it
                assert gc.get_threshold() == raised and gc.get_freeze_count() > 0
            assert gc.get_threshold() == raised and gc.get_freeze_count() > 0
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
        heap.freeze_imports()  # a second freeze where the first was undone: imports only again
        assert not heap.frozen_by_app()
    finally:
        gc.unfreeze()
        heap.froze_more()  # this test process's heap is not a headless mode's imports
    gc.freeze()  # frozen by someone else: freeze_imports leaves it, and it counts as an app's
    try:
        heap.freeze_imports()
        assert heap.frozen_by_app()
    finally:
        gc.unfreeze()
        heap.froze_more()


def test_only_the_process_entry_freezes_its_heap() -> None:
    """A headless mode run as the process's command freezes its imports once they are loaded and freezes
    what is alive at exit before the interpreter's own collections; `main(argv)` from a caller (a test,
    tests/cli_batch.py) leaves the caller's heap and exit alone."""
    probe = (
        "import atexit, gc, sys\n"
        "from ddtree_tui.cli import main\n"
        "n = atexit._ncallbacks()\n"
        "if sys.argv[1] == 'entry':\n"
        "    sys.argv[1:] = ['todo', 'list', '--todos', sys.argv[2]]\n"
        "    rc = main()\n"
        "else:\n"
        "    rc = main(['todo', 'list', '--todos', sys.argv[2]])\n"
        "print(rc, gc.get_freeze_count() > 0, atexit._ncallbacks() - n)\n"
    )
    out = {}
    for how in ("entry", "call"):
        with tempfile.TemporaryDirectory() as d:
            todos = Path(d) / "todo.toml"
            p = subprocess.run(
                [sys.executable, "-c", probe, how, str(todos)], capture_output=True, text=True, timeout=120
            )
        assert p.returncode == 0, p.stderr[-2000:]
        out[how] = p.stdout.split()[-3:]
    assert out["entry"][:2] == ["0", "True"] and out["call"][:2] == ["0", "False"]
    assert int(out["entry"][2]) - int(out["call"][2]) == 1  # the exit freeze (the mode may register others)


def _target(url: str) -> BenchTarget:
    return BenchTarget(ref="h/sim", base_url=url, algorithm="baseline")


@pytest.mark.slow
async def test_a_run_and_a_load_run_record_how_many_processes_and_why() -> None:
    cfg = SimConfig(algorithm="baseline", decode_rate=400)
    prompts = [Prompt(id=f"p{i}", text=f"q {i}") for i in range(2)]
    async with SimServer(cfg, log=lambda s: None) as sim:
        req = BenchRequest(prompts=prompts, warmup=1, concurrency=2, max_new_tokens=40)  # workers: auto
        run = await run_bench(req, [_target(sim.base_url)])
        assert run.client is not None and run.client.workers == 1
        assert (run.client.workers_reason or "").startswith("auto: 2 streams × ")  # 2 × ~400/s: one process
        fixed = await run_bench(req.model_copy(update={"workers": 2}), [_target(sim.base_url)])
        assert (
            fixed.client is not None
            and fixed.client.workers == 2
            and fixed.client.workers_reason == "--workers 2"
        )
        load = await run_load(
            req, [_target(sim.base_url)], LoadSpec(kind="concurrency", levels=[2]), LoadSettings(requests=2)
        )
        assert load.client_workers == 1 and (load.client_workers_reason or "").startswith(
            "auto: 2 streams × "
        )
        assert all(r.ok for r in load.results)


async def test_streams_are_counted_open_while_read_and_closed_after() -> None:
    """The deferred scoring (client.FINALIZE_DEFER_S) waits only while other streams are open: the count
    of open streams goes back to zero, failures included."""
    from ddtree_tui.bench import client

    cfg = SimConfig(algorithm="baseline", decode_rate=400)
    prompts = [Prompt(id=f"p{i}", text=f"q {i}") for i in range(3)]
    async with SimServer(cfg, log=lambda s: None) as sim:
        req = BenchRequest(prompts=prompts, warmup=0, concurrency=3, max_new_tokens=12, workers=1)
        run = await run_bench(req, [_target(sim.base_url)])
    bad = await run_bench(req, [_target("http://127.0.0.1:9")])
    assert all(r.ok for r in run.results) and not any(r.ok for r in bad.results)
    assert client._streams.open == 0


async def test_a_warm_up_request_asks_for_at_most_warmup_tokens_and_the_run_records_it() -> None:
    """Warm-ups are cut to `warmup_tokens` new tokens (default 64; 0: as many as a measured request), in a
    plain run and a load level alike, through a real socket; the measured requests are not."""
    cfg = SimConfig(algorithm="baseline", decode_rate=2000)
    prompts = [Prompt(id=f"p{i}", text=f"q {i}") for i in range(2)]
    seen: list[RequestResult] = []

    def on_event(ev: object) -> None:
        if isinstance(ev, PromptFinished):
            seen.append(ev.result)

    def tokens(warmup: bool) -> list[int | None]:
        out = [r.output_tokens for r in seen if r.warmup == warmup and r.ok]
        seen.clear()
        return out

    async with SimServer(cfg, log=lambda s: None) as sim:
        req = BenchRequest(
            prompts=prompts, warmup=1, concurrency=2, max_new_tokens=80, ignore_eos=True, warmup_tokens=16
        )
        assert BenchRequest(prompts=prompts).warmup_tokens == 64
        run = await run_bench(req, [_target(sim.base_url)], on_event)
        assert run.warmup_tokens == 16
        warm = tokens(True)
        assert warm and set(warm) == {16}, warm
        assert {r.output_tokens for r in run.results} == {80}
        whole = await run_bench(
            req.model_copy(update={"warmup_tokens": 0}), [_target(sim.base_url)], on_event
        )
        assert whole.warmup_tokens == 0 and set(tokens(True)) == {80}
        load = await run_load(
            req,
            [_target(sim.base_url)],
            LoadSpec(kind="concurrency", levels=[2]),
            LoadSettings(requests=2),
            RunHooks(on_event=on_event),
        )
        assert load.warmup_tokens == 16 and {r.output_tokens for r in load.results} == {80}
        lw = tokens(True)
        assert lw and set(lw) == {16}, lw

"""Client workers forked from a zygote (bench/zygote.py, issue 26), real processes against a real server on
loopback: one zygote forks every worker of a run, each worker measures, all end with the run and are waited
for (their CPU is in ours), nothing is left when the bench process is killed or interrupted, and
DDTREE_BENCH_WORKER_BOOT=exec still starts each worker as its own Python."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from ddtree_tui.bench.models import BenchTarget, SamplingParams
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.bench.worker import Worker
from ddtree_tui.bench.zygote import BOOT_ENV, ZYGOTE_FLAG, ForkedProcess
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer


def _sim(rate: float) -> SimServer:
    return SimServer(SimConfig(algorithm="baseline", decode_rate=rate), log=lambda s: None)


def _target(url: str) -> BenchTarget:
    return BenchTarget(ref="h/sim", base_url=url, algorithm="baseline", mode="baseline")


def _prompt(i: int) -> Prompt:
    return Prompt(id=f"p{i}", messages=[{"role": "user", "content": f"question {i}"}])


def _cpu(t: resource.struct_rusage) -> float:
    return t.ru_utime + t.ru_stime


async def _measure(w: Worker, url: str, n: int, tokens: int) -> None:
    sp = SamplingParams(max_new_tokens=tokens)
    opts = {"timeout": 60.0, "tokens_interval": 1.0, "seq": 0, "repeat": 0, "warmup": False}
    done = await asyncio.gather(
        *(w.measure(_target(url), _prompt(i), sp, on_tokens=None, **opts) for i in range(n))  # type: ignore[arg-type]
    )
    assert all(r.ok and r.output_tokens == tokens for r, _, _ in done), [r.error for r, _, _ in done]


async def test_one_zygote_forks_every_worker_each_measures_and_all_end_with_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(BOOT_ENV, raising=False)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}  # other tests' servers in this process, if any
    workers = [Worker(i) for i in range(3)]
    async with _sim(5000) as sim:
        try:
            await asyncio.gather(*(w.start() for w in workers))
            procs = [w.proc for w in workers]
            assert all(isinstance(p, ForkedProcess) for p in procs)
            pids = [p.pid for p in procs if isinstance(p, ForkedProcess)]
            parents = {psutil.Process(pid).ppid() for pid in pids}
            assert len(parents) == 1  # one zygote for the three
            zygote = psutil.Process(parents.pop())
            assert zygote.ppid() == me.pid and ZYGOTE_FLAG in zygote.cmdline()
            await asyncio.gather(*(_measure(w, sim.base_url, 2, 20) for w in workers))
        finally:
            await asyncio.gather(*(w.close() for w in workers))
    assert [w.proc.returncode for w in workers if w.proc is not None] == [0, 0, 0]
    # the zygote was waited for before the last close returned, and its workers before it
    assert not zygote.is_running()
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).ppid() == zygote.pid for pid in pids)
    assert {p.pid for p in me.children(recursive=True)} <= before


async def test_the_workers_cpu_is_counted_in_ours_once_they_have_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """getrusage of our waited children grows by at least the zygote's own CPU plus what the workers spent
    measuring (their loop monitors' process time): it would not if the zygote left its workers unwaited, or
    we the zygote."""
    monkeypatch.delenv(BOOT_ENV, raising=False)
    before = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    workers = [Worker(i) for i in range(2)]
    spent = []
    async with _sim(20000) as sim:
        try:
            await asyncio.gather(*(w.start() for w in workers))
            for w in workers:
                await w.monitor_start()
            await asyncio.gather(*(_measure(w, sim.base_url, 6, 400) for w in workers))
            for w in workers:
                spent.append((await w.monitor_stop())["cpu_s"] or 0.0)
            p = workers[0].proc
            assert isinstance(p, ForkedProcess)
            zygote = psutil.Process(psutil.Process(p.pid).ppid())
            zcpu = zygote.cpu_times()
            zygote_own = zcpu.user + zcpu.system  # its children are not in this yet: they run
        finally:
            await asyncio.gather(*(w.close() for w in workers))
    after = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    assert sum(spent) > 0.005, spent  # the workers did measurable work, so the check below can fail
    assert after - before >= zygote_own + sum(spent) - 0.001, (after - before, zygote_own, spent)


async def test_exec_boot_starts_each_worker_as_its_own_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BOOT_ENV, "exec")
    w = Worker(0)
    async with _sim(5000) as sim:
        try:
            await w.start()
            assert w.proc is not None and not isinstance(w.proc, ForkedProcess)
            assert psutil.Process(w.proc.pid).ppid() == os.getpid()  # type: ignore[attr-defined]
            await _measure(w, sim.base_url, 2, 10)
        finally:
            await w.close()
    assert w.proc.returncode == 0


def _tail(log: Path) -> str:
    return log.read_text()[-2000:]


def _bench_argv(url: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ddtree_tui.cli", "--run-bench", "--url", url, "--workers", "2",
        "--concurrency", "4", "--warmup", "0", "--history", str(tmp_path / "h.jsonl"), *extra,
    ]  # fmt: skip


async def _tree_when_workers_run(proc: asyncio.subprocess.Process, log: Path, n: int) -> list[psutil.Process]:
    """The bench process's descendants once its zygote (a fork of it, so its child with its command line)
    has forked `n` workers (bounded wait)."""
    me = psutil.Process(proc.pid)
    tree: list[psutil.Process] = []
    for _ in range(600):
        assert proc.returncode is None, _tail(log)
        with contextlib.suppress(psutil.Error):
            tree = me.children(recursive=True)
            kids = me.children()
            if any(k.cmdline() == me.cmdline() and len(k.children()) >= n for k in kids):
                return tree
        await asyncio.sleep(0.1)
    raise AssertionError(f"no zygote with {n} workers under the bench process: {tree}")


async def _all_gone(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of `procs` still running after a bounded wait (a zombie has ended)."""
    left = procs
    for _ in range(300):
        left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not left:
            return []
        await asyncio.sleep(0.1)
    return left


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
async def test_nothing_is_left_when_the_bench_process_is_killed_or_interrupted(
    how: signal.Signals, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BOOT_ENV, raising=False)
    log = tmp_path / "stderr.txt"
    async with _sim(20) as sim:  # 20 tokens/s, 2000 tokens: the run is still going when it is stopped
        argv = _bench_argv(sim.base_url, tmp_path, "--max-new-tokens", "2000", "--repeats", "4")
        with log.open("w") as err:
            proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL, stderr=err)
        try:
            tree = await _tree_when_workers_run(proc, log, 2)
            proc.send_signal(how)  # the process this test started
            async with asyncio.timeout(60):
                await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert await _all_gone(tree) == []
    if how == signal.SIGINT:
        assert "interrupted" in _tail(log), _tail(log)


async def test_a_whole_headless_run_forks_its_workers_and_records_them(tmp_path: Path) -> None:
    async with _sim(3000) as sim:
        argv = _bench_argv(
            sim.base_url, tmp_path, "--max-new-tokens", "30", "--json", str(tmp_path / "r.json")
        )
        token = uuid.uuid4().hex  # in the environment of the bench process, its zygote and its workers
        env = {**{k: v for k, v in os.environ.items() if k != BOOT_ENV}, "ZYGOTE_TEST_TOKEN": token}
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-2000:]
    run = json.loads((tmp_path / "r.json").read_text())
    assert run["client"]["workers"] == 2 and run["client"]["cpu_s"] > 0
    assert all(r["ok"] for r in run["results"])
    assert _with_token(token) == []  # nothing of the run is left


def _with_token(token: str) -> list[psutil.Process]:
    """Running processes whose environment carries `token`."""
    found = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get("ZYGOTE_TEST_TOKEN") == token:
                found.append(p)
    return found


# what a `--run-bench --url` process needs no host for: the services' manager and its aiohttp probes, the
# telemetry sampler, the hold files and the simulator's launch code (issue 26: ~0.2 s of its start)
HOSTLESS = (
    "aiohttp",
    "ddtree_tui.services.lifecycle",
    "ddtree_tui.services.launchline",
    "ddtree_tui.telemetry.sampler",
    "ddtree_tui.sim.process",
)


async def test_a_url_run_imports_nothing_a_host_needs(tmp_path: Path) -> None:
    async with _sim(3000) as sim:
        argv = _bench_argv(sim.base_url, tmp_path, "--max-new-tokens", "8")
        argv[1:1] = ["-X", "importtime"]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    text = err.decode()
    assert proc.returncode == 0, text[-2000:]
    mods = {ln.rsplit("|", 1)[-1].strip() for ln in text.splitlines() if ln.startswith("import time:")}
    assert "ddtree_tui.fleet.benching" in mods and "ddtree_tui.bench.runner" in mods  # the check sees imports
    assert not {m for m in mods if any(m == h or m.startswith(h + ".") for h in HOSTLESS)}


def test_a_run_forks_a_zygote_only_where_it_may_start_workers() -> None:
    from ddtree_tui.bench.models import BenchRequest, ShapeRequest
    from ddtree_tui.bench.worker import plan_workers
    from ddtree_tui.fleet.benchprocs import may_start_workers

    assert may_start_workers(BenchRequest(concurrency=4), cores=16)
    assert not may_start_workers(BenchRequest(concurrency=1), cores=16)
    assert not may_start_workers(BenchRequest(concurrency=4, workers=1), cores=16)
    assert may_start_workers(BenchRequest(concurrency=1, workers=2), cores=16)
    assert may_start_workers(ShapeRequest(load="concurrency:1,4"), cores=16)
    assert not may_start_workers(ShapeRequest(load="concurrency:1"), cores=16)
    assert not may_start_workers(ShapeRequest(load="sync"), cores=16)
    assert may_start_workers(ShapeRequest(load="poisson:20,1"), cores=16)
    # on 2 usable cores auto never plans a second process (one core is left over), so no zygote is forked;
    # an explicit --workers still gets its processes
    assert plan_workers(0, 256, 1000.0, cores=2)[0] == 1
    assert not may_start_workers(ShapeRequest(load="poisson:20,1"), cores=2)
    assert not may_start_workers(BenchRequest(concurrency=64), cores=2)
    assert may_start_workers(BenchRequest(concurrency=64, workers=2), cores=2)
    assert may_start_workers(BenchRequest(concurrency=64), cores=3)

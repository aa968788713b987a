"""Issue 29, target identity: a foreign listener can never produce a figure under a service's name.

Real things only: a local profile with a simulated service launched through the fleet (a real child process
with its pidfile), a foreign listener that is a plain socket (or a simulated server) started by this test on
the service's port, `ddtree-tui smoke` / `--run-bench` in child processes, and the history and todo evidence
read back as a user would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ddtree_tui.bench import history
from ddtree_tui.bench.models import BenchRequest, ShapeRequest
from ddtree_tui.bench.prompts import Prompt
from ddtree_tui.config import load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.fleet.benching import BenchRefused
from ddtree_tui.model.events import BenchEventWrap, Notice
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.server import SimServer
from ddtree_tui.todo.evidence import HistoryBenchContext, bench_ok
from tests.fixtures.services.support import cleanup_workdir
from tests.util import cli_argv, cli_batch, free_port

pytestmark = pytest.mark.timeout(90)

REF = "loc/sim"
PROMPTS = [Prompt(id="p0", messages=[{"role": "user", "content": "question"}])]


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def profile(tmp_path: Path, port: int) -> Iterator[Path]:
    p = tmp_path / "loc.toml"
    p.write_text(
        f'name = "loc"\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{tmp_path / "w"}"\n'
        '[telemetry]\nsource = "none"\n\n'
        f'[[service]]\nname = "sim"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {port}\n'
        "kill_timeout = 5\nstartup_timeout = 20\n"
        "[service.sim]\naccept_length = 3.0\nload_time = 0.2\ndecode_rate = 2000\nseed = 1\n"
    )
    yield p
    cleanup_workdir(tmp_path / "w")


@contextlib.contextmanager
def foreign_listener(port: int) -> Iterator[socket.socket]:
    """A plain socket listening on the service's port: accepts connections, answers nothing."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    try:
        yield s
    finally:
        s.close()


def _smoke_args(tmp_path: Path, *args: str) -> list[str]:
    return ["smoke", REF, "--profile", str(tmp_path / "loc.toml"), "--timeout", "10", *args]


def _smoke(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = cli_argv(*_smoke_args(tmp_path, *args))
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
async def test_smoke_of_a_stopped_service_refuses_a_foreign_listener(
    tmp_path: Path, profile: Path, port: int
) -> None:
    """The first row: `smoke local/dflash` while it is stopped and another process holds its port used to
    print `ok … tok/s`, exit 0. Now: refused, exit 1, the holder named; `--force` measures it, said so."""
    with foreign_listener(port):  # both command lines in one child (tests/cli_batch.py), the port held
        p, pj = await asyncio.to_thread(
            cli_batch, [_smoke_args(tmp_path), _smoke_args(tmp_path, "--json")], tmp_path
        )
    assert p.returncode == 1, p.stdout + p.stderr
    line = p.stdout.strip()
    assert line.startswith(f"smoke {REF}: FAILED — service is stopped; refused to measure {REF}"), line
    assert f"port {port} is held by pid {os.getpid()}" in line and "not the service we launched" in line
    assert "--force" in line and " ok " not in line

    assert pj.returncode == 1
    ident = json.loads(pj.stdout)["identity"]
    assert ident["verdict"] == "foreign" and ident["verified"] is False and ident["forced"] is False
    assert ident["listener_pids"] == [os.getpid()] and ident["port"] == port

    # a server that does answer: with --force it is measured, and the line says whose figure it is
    async with SimServer(
        SimConfig(algorithm="dflash", decode_rate=2000, load_time=0, port=port), log=lambda s: None
    ):
        p = await asyncio.to_thread(_smoke, tmp_path, "--force", "--max-new-tokens", "4")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "ok — 4 tokens" in p.stdout and "FORCED, not verified" in p.stdout
        assert f"held by pid {os.getpid()}" in p.stdout


@pytest.fixture
async def fleet(profile: Path, tmp_path: Path) -> AsyncIterator[Fleet]:
    # no watcher: the snapshot keeps what the launch saw, as a stale view would between two probes
    async with Fleet.open(
        [load_profile(profile)],
        todos_path=tmp_path / "todos.json",
        history_path=tmp_path / "h.jsonl",
        telemetry=False,
        watch=False,
        probe_interval=0.3,  # a wait for ready polls (no watcher): at 0.3 s, not the default 2 s
    ) as f:
        yield f


def _history(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (tmp_path / "h.jsonl").read_text().splitlines()]


async def test_a_run_records_a_verified_identity_and_refuses_a_foreign_one(
    fleet: Fleet, tmp_path: Path, port: int
) -> None:
    res = await fleet.launch(REF)
    assert res.ok, res.message
    ready = await fleet.wait_service(REF, {"ready"}, 20)
    assert ready.state == "ready" and ready.pid

    ident = await fleet.identify(REF)
    assert ident.verdict == "ours" and ident.verified and ident.service_pid == ready.pid
    run = await fleet.run_bench(BenchRequest(refs=[REF], prompts="seed3", warmup=0, max_new_tokens=4))
    rec = _history(tmp_path)[-1]
    assert rec["id"] == run.id
    seen = rec["targets"][0]["identity"]  # type: ignore[index]
    assert (seen["verdict"], seen["verified"], seen["port"]) == ("ours", True, port)
    assert HistoryBenchContext(fleet.snapshot(), tmp_path / "h.jsonl").bench_ok(REF, "seed3") is True

    # the service dies behind the fleet's back (our own child) and a stranger takes its port: the snapshot
    # still says ready, the identity check does not believe it
    os.killpg(os.getpgid(ready.pid), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            cm = foreign_listener(port)
            cm.__enter__()
            break
        except OSError:
            await asyncio.sleep(0.05)
    else:
        raise AssertionError("the killed service's port never came free")
    try:
        assert fleet.snapshot().service("loc", "sim").state == "ready"  # type: ignore[union-attr]
        q = fleet.subscribe()
        with pytest.raises(BenchRefused, match="nothing to benchmark"):
            await fleet.run_bench(BenchRequest(refs=[REF], prompts="seed3", warmup=0, max_new_tokens=4))
        words = [ev.text for ev in _drain(q) if isinstance(ev, Notice)]
        assert any(
            w.startswith(f"{REF} left out: refused to measure {REF}: {REF} is not running")
            and f"held by pid {os.getpid()}" in w
            for w in words
        ), words
    finally:
        cm.__exit__(None, None, None)
    assert len(_history(tmp_path)) == 1  # nothing measured, nothing filed

    # forced: measured, recorded as forced, and never evidence
    async with SimServer(
        SimConfig(algorithm="dflash", decode_rate=2000, load_time=0, port=port), log=lambda s: None
    ):
        forced = await fleet.run_bench(
            BenchRequest(refs=[REF], prompts="seed3", warmup=0, max_new_tokens=4, force=True)
        )
    assert forced.failed == 0 and forced.targets[0].identity is not None
    fi = forced.targets[0].identity
    assert (fi.verdict, fi.forced, fi.verified) == ("foreign", True, False)
    assert _history(tmp_path)[-1]["targets"][0]["identity"]["forced"] is True  # type: ignore[index]
    # the latest run is not evidence; the earlier verified one still is
    ctx = HistoryBenchContext(fleet.snapshot(), tmp_path / "h.jsonl")
    assert ctx.bench_ok(REF, "seed3") is True
    assert bench_ok(history.load(tmp_path / "h.jsonl")[-1:], REF, "seed3") is None


def _drain(q: asyncio.Queue[object]) -> list[object]:
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


@pytest.mark.slow
def test_status_json_and_its_todo_evidence_agree(tmp_path: Path, profile: Path) -> None:
    """Same family: `status --json` said a service was `stopped` while the todo evidence in the same document
    said "unknown" (judged before the first probe). Both now come from the same settled snapshot."""
    todos = tmp_path / "todos.json"
    items = [
        {"content": "sim is down", "status": "pending", "check": f"service {REF} stopped"},
        {"content": "host is up", "status": "pending", "check": "host loc connected"},
    ]
    todos.write_text(json.dumps({"todos": items}))
    argv = cli_argv("status", "--json", "--profile", str(profile), "--todos", str(todos), "--timeout", "10")
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    svc = next(s for h in doc["hosts"] for s in h["services"] if s["name"] == "sim")
    assert svc["state"] == "stopped"
    ev = doc["todos"]["evidence"]
    assert [(e["state"], e["detail"]) for e in ev] == [
        ("verified", f"service {REF} is stopped"),
        ("verified", "host loc is connected"),
    ]


async def _cli(cwd: Path, *args: str) -> tuple[int, str]:
    """`ddtree-tui ARGS` in a child process (this test's servers keep serving meanwhile): (exit, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *cli_argv(*args), cwd=cwd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 90)
    return int(proc.returncode or 0), err.decode()


@pytest.mark.slow
async def test_run_bench_refuses_or_forces_a_foreign_listener_and_shows_a_changed_url_server(
    tmp_path: Path, profile: Path, port: int
) -> None:
    hist = ["--history", str(tmp_path / "h.jsonl")]
    base = ["--run-bench", "--warmup", "0", "--max-new-tokens", "4", *hist]
    out = tmp_path / "r.json"
    cfg = SimConfig(algorithm="dflash", decode_rate=2000, load_time=0, port=port)
    async with SimServer(cfg, log=lambda s: None):  # served by this loop while one child runs both
        refused, forced = await asyncio.to_thread(
            cli_batch,
            [[*base, "--profile", str(profile), "--services", REF],
             [*base, "--profile", str(profile), "--services", REF, "--force", "--json", str(out)]],
            tmp_path,
        )  # fmt: skip
        code, err = refused.returncode, refused.stderr
        assert code == 1 and "nothing to benchmark" in err and f"{REF} left out" in err, err
        code, err = forced.returncode, forced.stderr
        assert code == 0, err
        assert f"{REF} measured with --force" in err and f"held by pid {os.getpid()}" in err
        ident = json.loads(out.read_text())["targets"][0]["identity"]
        assert (ident["verdict"], ident["forced"], ident["verified"]) == ("foreign", True, False)

    # a --url server: what it says of itself is recorded, and a different server behind the same URL is said
    url = f"http://127.0.0.1:{port}"
    for model in ("sim/model-a", "sim/model-b"):
        async with SimServer(cfg.model_copy(update={"model_path": model}), log=lambda s: None):
            code, err = await _cli(tmp_path, *base, "--url", url, "--json", str(out))
        assert code == 0, err
        ident = json.loads(out.read_text())["targets"][0]["identity"]
        assert (ident["kind"], ident["verdict"], ident["model"]) == ("url", "server", model)
    assert ident["changed"] == "model sim/model-a → sim/model-b"
    assert f"127.0.0.1:{port} changed since its last run: model sim/model-a → sim/model-b" in err


async def test_a_load_ladder_stops_when_its_service_is_no_longer_the_one_checked(
    fleet: Fleet, tmp_path: Path, port: int
) -> None:
    """Each load level after the first asks again: the service dies during level 1 and a stranger takes its
    port, so level 2 is never measured under the service's name; the run says why it stopped."""
    assert (await fleet.launch(REF)).ok
    ready = await fleet.wait_service(REF, {"ready"}, 20)
    assert ready.pid
    q = fleet.subscribe()
    req = ShapeRequest(refs=[REF], prompts=PROMPTS, load="concurrency:1,2", duration_s=1.5, warmup=0,
                       timeout=2.0, max_new_tokens=16, stop_on_saturation=False)  # fmt: skip
    task = asyncio.create_task(fleet.run_load_shape(req))
    stranger: socket.socket | None = None
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the first request of level 1 has finished
            ev = await asyncio.wait_for(q.get(), 20)
            if isinstance(ev, BenchEventWrap) and getattr(ev.event, "kind", "") == "prompt_finished":
                break
        os.killpg(os.getpgid(ready.pid), signal.SIGKILL)  # our own launched child
        while stranger is None and time.monotonic() < deadline:
            try:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
                s.listen(16)
                stranger = s
            except OSError:
                s.close()
                await asyncio.sleep(0.05)
        assert stranger is not None, "the killed service's port never came free"
        run = await asyncio.wait_for(task, 60)
    finally:
        task.cancel()
        if stranger is not None:
            stranger.close()
    assert run.kind == "load" and [lv.label for lv in run.levels] == ["c=1"]
    assert run.stopped is not None and run.stopped.startswith(f"target identity lost: {REF} is not running")


async def test_smoke_by_url_records_what_the_server_says_it_is(tmp_path: Path, port: int) -> None:
    cfg = SimConfig(algorithm="dflash", decode_rate=2000, load_time=0, port=port, model_path="sim/model-a")
    async with SimServer(cfg, log=lambda s: None) as srv:
        argv = cli_argv("smoke", srv.base_url, "--max-new-tokens", "4", "--json")
        p = await asyncio.to_thread(
            subprocess.run, argv, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    assert p.returncode == 0, p.stderr
    ident = json.loads(p.stdout)["identity"]
    assert (ident["kind"], ident["verdict"], ident["verified"], ident["model"]) == (
        "url", "server", True, "sim/model-a"
    )  # fmt: skip
    assert ident["speculative_algorithm"] == "DFLASH"

"""The tuning lab end to end, on this machine: the demo profile's own ready-made sweep (budget x top-k, tree
verify) run by a real `ddtree-tui sweep` child process against real simulated services; the child SIGKILLed
mid-point and the sweep resumed; the optimum the simulator was built with found; `sweep apply` writing it into
a copy of the profile with every comment kept. Failed points: a value the host's (fake) SGLang parser rejects
is never launched, a service that crashes at start is recorded with its log tail; the sweep goes on."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.sim.config import ddtree_expected_speed
from tests.fixtures.services.support import cleanup_workdir, profile_toml, service_toml
from tests.util import free_port

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _holds_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDTREE_TUI_HOLDS_DIR", str(tmp_path / "holds"))  # the children inherit it


def demo_copy(tmp_path: Path) -> tuple[Path, int]:
    """The shipped demo profile with its own workdir, free ports and a fast simulator (same sweep preset)."""
    text = (ROOT / "hostprofiles" / "local-demo.toml").read_text()
    port = free_port()
    text = text.replace('workdir = ".ddtree/demo"', f"workdir = {json.dumps(str(tmp_path / 'wd'))}")
    text = text.replace("port = 31010", f"port = {free_port()}").replace("port = 31011", f"port = {port}")
    text = text.replace("decode_rate = 40.5", "decode_rate = 250.0").replace(
        "load_time = 2.0", "load_time = 0.2"
    )
    p = tmp_path / "local-demo.toml"
    p.write_text(text)
    return p, port


def sweep_argv(profile: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ddtree_tui.cli", "--profile", str(profile), "sweep", "local/ddtree-shadow",
            "--preset", "budget-topk", "--out", str(out), "--repeats", "2", "--max-new-tokens", "96",
            *extra]  # fmt: skip


def cli_here(cwd: Path, *argvs: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """`ddtree-tui ARGV` for each of `argvs`, run in order in THIS process, in `cwd` (tests/cli_batch.py's
    runner: what each returned, printed and wrote to stderr). For the command lines whose process is not what
    a test checks (a launch before a sweep, a sweep nobody signals, show / apply / report, a status): each
    child paid the imports before doing anything (1.5-2.5 s of CPU, issue 24). A sweep that is signalled or
    SIGKILLed keeps its own child; the holds, the pidfiles and the sweep's files are across processes either
    way (this process is not the sweep child's)."""
    from tests.cli_batch import run_all

    with contextlib.chdir(cwd):
        got = run_all([list(a) for a in argvs])
    return [
        subprocess.CompletedProcess(["ddtree-tui", *a], r["returncode"], str(r["stdout"]), str(r["stderr"]))
        for a, r in zip(argvs, got, strict=True)
    ]


def read_state(out: Path) -> dict:
    try:
        return json.loads((out / "sweep.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}


@pytest.mark.slow
def test_demo_sweep_finds_interior_optimum_resumes_after_sigkill_and_applies(tmp_path: Path) -> None:
    profile, port = demo_copy(tmp_path)
    # half demo_copy's pace: the best point is ~7 % ahead of the profile's own setting (the simulator's model),
    # and 96-token requests of ~0.1 s at 250 passes/s let a starved machine's scheduling hiccups decide that
    # (a helper's full run at load ~20 read the best point -0.16 % against the baseline); ~0.2 s requests
    # halve their weight. The ratios, which decide the best point, are the model's at any pace.
    profile.write_text(profile.read_text().replace("decode_rate = 250.0", "decode_rate = 125.0"))
    original = profile.read_text()
    out = tmp_path / "sweep"
    try:
        # running before the sweep, so that the sweep puts it back running (a stopped one stays stopped)
        # (in this process: the launch is not what is checked; the sweep below is a child of its own)
        (up,) = cli_here(tmp_path, ["--profile", str(profile), "launch", "local/ddtree-shadow"])
        assert up.returncode == 0, up.stderr
        child = subprocess.Popen(
            sweep_argv(profile, out), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        cut: int | None = None
        deadline = time.monotonic() + 200
        checked_hold = False
        while time.monotonic() < deadline and child.poll() is None:
            pts = read_state(out).get("points", [])
            if not checked_hold and any(p["status"] == "measuring" for p in pts):
                # another ddtree-tui process may not kill or launch the held service (this one: the holder is
                # the sweep child)
                (k,) = cli_here(tmp_path, ["--profile", str(profile), "kill", "local/ddtree-shadow"])
                assert k.returncode == 1 and "held by sweep" in k.stderr and "nothing was done" in k.stderr, k
                checked_hold = True
                continue
            busy = [p for p in pts if p["status"] == "measuring" and p["index"] >= 3]
            if busy:
                cut = busy[0]["index"]
                break
            time.sleep(0.05)
        assert cut is not None and checked_hold, (
            f"never saw point 3+ measuring: {child.poll()} {read_state(out)}"
        )
        os.kill(child.pid, signal.SIGKILL)  # our own child, by its pid
        child.communicate(timeout=10)
        before = read_state(out)
        done_before = {
            p["index"]: p["measurement"]["bench_run_id"] for p in before["points"] if p["status"] == "done"
        }
        assert len(done_before) >= 3 and cut not in done_before
        assert before["finished"] is False

        # the resumed sweep runs to its end unsignalled: in this process (its files are what is checked)
        (p,) = cli_here(tmp_path, sweep_argv(profile, out, "--resume")[3:])
        assert p.returncode == 0, p.stderr[-3000:]
        after = read_state(out)
        assert after["finished"] is True and after["restored"] is True
        pts = {q["index"]: q for q in after["points"]}
        assert all(q["status"] == "done" for q in pts.values()), [
            (q["index"], q["status"], q["error"]) for q in pts.values()
        ]
        # finished points were not measured again; the one cut off was, from scratch
        for i, run_id in done_before.items():
            assert pts[i]["measurement"]["bench_run_id"] == run_id
            assert pts[i]["attempts"] == 1
        assert pts[cut]["attempts"] == 2

        res = json.loads((out / "results.json").read_text())
        best = pts[res["best"]]["overrides"]
        # what the simulator was built to make best over this grid, and an interior point of it
        grid = [(b, k) for b in (8, 16, 32) for k in (1, 2, 4)]
        want = max(grid, key=lambda bk: ddtree_expected_speed(3.4, *bk))
        assert want == (16, 2)
        # The best measured point is the one the simulator was built to make best, or one the sweep cannot
        # tell apart from it: their 95 % intervals of the delta overlap (a wall-clock measurement; on a busy
        # machine one slow request widens an interval, and the test must not fail on that, issue 24/25).
        want_over = {"mode": "tree", "budget": "16", "env.SGLANG_DDTREE_MAX_TOPK": "2"}
        if best != want_over:
            by = {json.dumps(q["overrides"], sort_keys=True): q for q in res["points"]}
            b, w = by[json.dumps(best, sort_keys=True)], by[json.dumps(want_over, sort_keys=True)]
            assert None not in (b["delta_lo_pct"], w["delta_hi_pct"]), p.stdout
            assert w["delta_hi_pct"] >= b["delta_lo_pct"], p.stdout  # the true best is not measurably worse
        ranked = [q for q in res["points"] if q["rank"] == 1]
        assert ranked and ranked[0]["delta_pct"] > 0 and ranked[0]["delta_lo_pct"] is not None
        assert "budget=16 env.SGLANG_DDTREE_MAX_TOPK=2" in p.stdout and "best: #" in p.stdout
        # the best point's values (16/2, or one the sweep could not tell apart from it: see above)
        b_budget, b_topk = best["budget"], best["env.SGLANG_DDTREE_MAX_TOPK"]
        assert f"--budget {b_budget}" in res["best_command"]
        assert f"SGLANG_DDTREE_MAX_TOPK={b_topk}" in res["best_command"]
        csv_lines = (out / "results.csv").read_text().splitlines()
        assert len(csv_lines) == 10 and "budget" in csv_lines[0]
        # the effective argv, server_info and versions of every point were recorded
        assert "--mode tree" in pts[cut]["argv"] and pts[cut]["versions"]["simulated"] is True
        assert pts[cut]["server_info"]["speculative_algorithm"] == "DDTREE"
        gpu = pts[cut]["gpus"][0]  # the demo's GPU numbers are a replay, and say so
        assert gpu["index"] == 0 and gpu["source"] == "replay" and gpu["mem_used_mb"] is not None
        assert pts[cut]["measurement"]["metrics"]["gpu_mem_mb"] is not None
        assert any("replay" in c for c in res["caveats"])
        # the service is back as the profile has it, and the profile file was never touched by the sweep
        info = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5).read())
        assert info["sim"]["mode"] == "shadow-linear" and info["speculative_ddtree_budget"] == 32
        assert profile.read_text() == original

        # apply the best point into a copy of the profile: every comment kept, the values written
        copy = tmp_path / "copy.toml"
        copy.write_text(original)
        # `sweep apply`, then `sweep show` to re-rank (in this process, as the resumed sweep)
        a, sh = cli_here(tmp_path, ["sweep", "apply", str(out), "--to", str(copy), "--yes"],
                         ["sweep", "show", str(out), "--objective", "goodput", "--constraint", "ttft_p90<0.001ms"])  # fmt: skip
        assert a.returncode == 0, a.stderr
        # the diff came first (the profile's budget is 32: a change unless the best point's is 32 too)
        assert "+mode = " in a.stdout
        assert b_budget == "32" or (f"+budget = {b_budget}" in a.stdout and "-budget = 32" in a.stdout)
        new = copy.read_text()
        comments = [ln.strip() for ln in original.splitlines() if ln.strip().startswith("#")]
        assert comments and all(c in new for c in comments)
        svc = parse_profile(new, copy).get_service("ddtree-shadow")
        assert svc is not None and (svc.mode, svc.budget, svc.env) == (
            "tree",
            int(b_budget),
            {"SGLANG_DDTREE_MAX_TOPK": b_topk},
        )
        assert profile.read_text() == original
        assert "restart local/ddtree-shadow" in a.stderr  # the redeploy offered
        # re-rank without measuring: a constraint nothing meets leaves no best; goodput counts only those
        assert sh.returncode == 0 and "best: none" in sh.stdout and "✗ ttft_p90<0.001ms" in sh.stdout, (
            sh.stdout
        )
        assert "SIMULATED" in sh.stdout and "cannot know" in sh.stdout
        shown = json.loads((out / "results.json").read_text())
        assert shown["best"] is None and all(q["goodput"] in (None, 0.0) for q in shown["points"])
    finally:
        cleanup_workdir(tmp_path / "wd")


@pytest.mark.slow
def test_rejected_value_and_crash_at_start_are_recorded_and_skipped(tmp_path: Path) -> None:
    """One sweep, two failures: the fake host parser refuses attention_backend=nonsense (never launched); the
    hybrid target's tree mode crashes at start (its log tail kept); the other points are measured."""
    wd = tmp_path / "wd"
    port = free_port()
    sim = (
        f'[[service]]\nname = "dd"\nalgorithm = "ddtree"\nmode = "shadow-linear"\nlauncher = "sim"\nport = {port}\n'
        "budget = 16\nstartup_timeout = 20\n[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\nhybrid = true\n"
    )
    fake = service_toml("fk", free_port())
    prof = tmp_path / "h.toml"
    prof.write_text(profile_toml("h", "local", wd, sim + fake))
    try:
        base = ["--profile", str(prof), "sweep", "--no-telemetry", "--repeats", "1", "--max-new-tokens", "16",
                "--warmup", "0"]  # fmt: skip
        # the three sweeps in this process, one after another (no signal, no kill: their files and output are
        # what is checked, not their processes)
        p, q, r = cli_here(
            tmp_path,
            [*base, "h/dd", "--set", "mode=shadow-linear,tree", "--out", str(tmp_path / "a")],
            [*base, "h/fk", "--set", "attention_backend=triton,nonsense", "--out", str(tmp_path / "b")],
            [*base, "h/dd", "--set", "budget=8,0", "--out", str(tmp_path / "c")],
        )
        assert p.returncode == 0, p.stderr[-3000:]
        pts = read_state(tmp_path / "a")["points"]
        assert [q["status"] for q in pts] == ["done", "failed"]
        assert "crashed" in pts[1]["error"] or "stopped" in pts[1]["error"], pts[1]
        assert any("hybrid" in ln for ln in pts[1]["log_tail"]), pts[1]["log_tail"]
        assert "#1 mode=tree: failed" in p.stdout
        # issue 29: the caveat says what --warmup 0 did, not "after one warm-up request"
        assert "Each point is measured after no warm-up request" in p.stdout and "one warm-up" not in p.stdout

        pts = read_state(tmp_path / "b")["points"]
        bad = pts[1]
        assert bad["status"] == "rejected" and bad["attempts"] == 0, bad
        assert "nonsense" in bad["error"] and "invalid choice" in bad["error"]
        assert pts[0]["attempts"] == 1  # the accepted value was launched (the fake server cannot generate)
        assert "rejected" in q.stdout

        # a value the profile model refuses stops the sweep before anything is launched (exit 2, named)
        assert r.returncode == 2 and "budget=0" in r.stderr and "greater than or equal to 1" in r.stderr
        assert not (tmp_path / "c" / "sweep.json").exists()
    finally:
        cleanup_workdir(wd)

"""The todo file against real processes: a writer killed mid-save, and the headless `todo` CLI."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_tui.cli import main
from ddtree_tui.todo import TodoStore
from tests.bench_runs import bench_run, history_line, write_history
from tests.sshd import SshdServer

WRITER = r"""
import sys
from pathlib import Path
from ddtree_tui.todo import TodoStore
s = TodoStore(Path(sys.argv[1]))
s.load()
for i in range(500):
    s.add(f"item {i} " + "x" * (i % 97), priority=("high", "medium", "low")[i % 3])
    if i % 5 == 0 and len(s.items) > 3:
        s.delete(0)
    s.save()
    if i == 0:
        print("go", flush=True)
print("done", flush=True)
"""


@pytest.mark.slow
def test_writer_killed_mid_saves_never_leaves_an_unreadable_file(tmp_path: Path) -> None:
    p = tmp_path / "todos.json"
    rng = random.Random(7)
    kills_mid_run = 0
    for round_ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"go", proc.stderr.read() if proc.stderr else b""
            time.sleep(rng.uniform(0.0, 0.4) if round_ else 0.0)
            proc.send_signal(signal.SIGKILL)
            rc = proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            for f in (proc.stdout, proc.stderr):
                if f:
                    f.close()
        kills_mid_run += rc == -signal.SIGKILL
        doc = json.loads(p.read_text())  # never unreadable
        assert isinstance(doc["todos"], list) and doc["todos"]
        assert all({"content", "priority", "status"} <= set(t) for t in doc["todos"])
        bak = p.with_name(p.name + ".bak")
        if bak.exists():
            json.loads(bak.read_text())
    assert kills_mid_run >= 5  # the kills really landed while it was saving
    # temp files a killed writer left are swept by a later save once stale
    for f in tmp_path.glob(".todos.json.*.tmp"):
        os.utime(f, (time.time() - 120, time.time() - 120))
    s = TodoStore(p)
    s.load()
    s.add("after")
    s.save()
    assert not list(tmp_path.glob(".todos.json.*.tmp")) and not list(tmp_path.glob(".todos.json.bak.*.tmp"))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_todo_cli_flow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(tmp_path / "t" / "todos.json")
    hist = tmp_path / "hist.jsonl"
    write_history(hist, [bench_run("seed3", [("ct200/dflash", None)])])  # typed BenchRun lines
    rc, out, _ = _run(capsys, "todo", "--todos", f)
    assert rc == 0 and "no items" in out
    rc, out, _ = _run(
        capsys, "todo", "add", "bench dflash", "--check", "bench ct200/dflash seed3 ok", "--todos", f
    )
    assert rc == 0 and "bench dflash" in out
    rc, _, _ = _run(capsys, "--todos", f, "todo", "add", "write notes", "--priority", "high")
    assert rc == 0
    rc, _, err = _run(capsys, "todo", "add", "bad", "--check", "service nope", "--todos", f)
    assert rc == 2 and "bad check" in err
    rc, out, _ = _run(capsys, "todo", "list", "--todos", f)
    assert rc == 0 and "  1. [ ] medium bench dflash" in out and "  2. [ ] high   write notes" in out
    # evidence holds but the item is pending: mismatch, exit 1
    rc, out, _ = _run(capsys, "--history", str(hist), "todo", "check", "--todos", f)
    assert rc == 1 and "verified" in out and "MISMATCH: evidence holds but still pending" in out
    rc, _, _ = _run(capsys, "todo", "done", "1", "--todos", f)
    assert rc == 0
    rc, out, _ = _run(capsys, "--history", str(hist), "todo", "check", "--json", "--todos", f)
    data = json.loads(out)
    assert rc == 0 and data["mismatches"] == 0
    assert data["items"][0]["state"] == "verified" and data["items"][1]["state"] == "none"
    # the bench now has a failed prompt: completed but failing
    with hist.open("a") as h:
        h.write(history_line(bench_run("seed3", [("ct200/dflash", "HTTP 500")])) + "\n")
    rc, out, _ = _run(capsys, "--history", str(hist), "todo", "check", "--todos", f)
    assert rc == 1 and "MISMATCH: completed but evidence fails" in out
    rc, _, _ = _run(capsys, "todo", "start", "2", "--todos", f)
    rc2, _, _ = _run(capsys, "todo", "cancel", "1", "--todos", f)
    assert rc == rc2 == 0
    rc, _, err = _run(capsys, "todo", "done", "9", "--todos", f)
    assert rc == 2 and "no item 9" in err
    rc, out, _ = _run(capsys, "todo", "list", "--json", "--todos", f)
    assert [t["status"] for t in json.loads(out)["todos"]] == ["cancelled", "in_progress"]


def test_todo_cli_corrupt_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "todos.json"
    f.write_text('{"todos": [\n  {"content": "a",\n  oops\n]}')
    before = f.read_bytes()
    rc, _, err = _run(capsys, "todo", "add", "x", "--todos", str(f))
    assert rc == 2 and f"{f}:3:3:" in err
    rc, _, err = _run(capsys, "todo", "list", "--todos", str(f))
    assert rc == 2 and "invalid JSON" in err
    assert f.read_bytes() == before


def test_todo_check_against_live_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """host/gpu evidence through the real core (collect_snapshot) on a local host profile."""
    prof = tmp_path / "me.toml"
    prof.write_text(
        f'name = "me"\naddress = "local"\nworkdir = "{tmp_path / "wd"}"\n[telemetry]\nsource = "none"\n'
    )
    f = str(tmp_path / "todos.json")
    for text, check in (("up", "host me connected"), ("down", "host me disconnected")):
        assert _run(capsys, "todo", "add", text, "--check", check, "--todos", f)[0] == 0
    assert _run(capsys, "todo", "done", "2", "--todos", f)[0] == 0
    env_before = dict(os.environ)
    rc, out, err = _run(capsys, "--profile", str(prof), "todo", "check", "--json", "--todos", f)
    assert dict(os.environ) == env_before
    data = json.loads(out)
    states = [(i["state"], i["mismatch"]) for i in data["items"]]
    assert states == [
        ("verified", "evidence holds but still pending"),
        ("failing", "completed but evidence fails"),
    ], err
    assert rc == 1


def test_todo_check_against_sshd_host(
    sshd: SshdServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """host evidence of a real ssh host, and a service the host does not run (unknown, no mismatch)."""
    prof = tmp_path / "t.toml"
    prof.write_text(
        f'name = "t"\naddress = "testhost"\nworkdir = "{tmp_path / "wd"}"\n[telemetry]\nsource = "none"\n'
    )
    f = str(tmp_path / "todos.json")
    assert _run(capsys, "todo", "add", "reach t", "--check", "host t connected", "--todos", f)[0] == 0
    assert _run(capsys, "todo", "add", "svc", "--check", "service t/nope ready", "--todos", f)[0] == 0
    assert _run(capsys, "todo", "done", "1", "--todos", f)[0] == 0
    assert _run(capsys, "todo", "done", "2", "--todos", f)[0] == 0
    rc, out, err = _run(capsys, "--profile", str(prof), "todo", "check", "--json", "--todos", f)
    items = json.loads(out)["items"]
    assert [(i["state"], i["mismatch"]) for i in items] == [("verified", None), ("unknown", None)], err
    assert rc == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "t"\nbogus = 1\n')
    rc, _, err = _run(capsys, "--profile", str(bad), "todo", "check", "--todos", f)
    assert rc == 2 and "bogus" in err

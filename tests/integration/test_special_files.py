"""Issue 20 item 9 (and SIGHUP): writing results to a special file must never replace it.

Never the real /dev/null: every device here is our own node made with mknod in a temp dir (char 1,3 is the
null device, char 1,7 the full device: every write fails with ENOSPC), and FIFOs with mkfifo. Each test checks
the node is still that kind of file afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddtree_tui.bench import report
from ddtree_tui.cli import main
from ddtree_tui.remote import atomicio
from ddtree_tui.sim.config import TIME_SCALE_ENV
from tests.procs import alive
from tests.util import cli_batch, demo_profile

pytestmark = pytest.mark.timeout(90)


def null_device(d: Path, name: str = "null") -> Path:
    p = d / name
    os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return p


def full_device(d: Path) -> Path:
    p = d / "full"
    os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return p


def is_chr(p: Path) -> bool:
    return stat.S_ISCHR(os.lstat(p).st_mode)


class FifoReader:
    """Reads a FIFO to the end in a thread (a writer's open blocks until a reader is there)."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.data = b""
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            self.data = f.read()

    def join(self) -> bytes:
        self.t.join(20)
        return self.data


def test_write_file_keeps_devices_fifos_and_refuses_directories(tmp_path: Path) -> None:
    dev = null_device(tmp_path)
    assert atomicio.write_file(dev, "x" * 24000)
    assert is_chr(dev) and os.stat(dev).st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temp file left next to it
    fifo = FifoReader(tmp_path / "fifo")
    atomicio.write_file(fifo.path, '{"a": 1}')
    assert fifo.join() == b'{"a": 1}' and stat.S_ISFIFO(os.lstat(fifo.path).st_mode)
    d = tmp_path / "adir"
    d.mkdir()
    (d / "keep").write_text("k")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        atomicio.write_file(d, "x")
    assert (d / "keep").read_text() == "k"
    with pytest.raises(OSError) as e:
        atomicio.write_file(full_device(tmp_path), "x")
    assert e.value.errno == 28 and is_chr(tmp_path / "full")
    # regular files: replaced atomically, mode kept; a symlink is followed and stays a link
    reg = tmp_path / "r.json"
    reg.write_text("old")
    reg.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(reg)
    atomicio.write_file(link, "new")
    assert link.is_symlink() and reg.read_text() == "new" and (reg.stat().st_mode & 0o777) == 0o640
    um = os.umask(0o022)
    try:
        atomicio.write_file(tmp_path / "new.json", "{}")
        assert (
            os.stat(tmp_path / "new.json").st_mode & 0o777
        ) == 0o644  # the umask's mode, not mkstemp's 0600
        atomicio.write_file(tmp_path / "pid.json", "{}", mode=0o600)
        assert (os.stat(tmp_path / "pid.json").st_mode & 0o777) == 0o600
    finally:
        os.umask(um)


@pytest.mark.slow
def test_bench_json_csv_history_into_devices_and_fifos(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the demo's sims fast-forwarded: what is checked is not their pace
    monkeypatch.setenv(TIME_SCALE_ENV, "10")
    dev = null_device(tmp_path)
    hist = null_device(tmp_path, "histnull")
    fifo = FifoReader(tmp_path / "csv.fifo")
    argv = ["--run-bench", "--demo", "--profile", str(demo_profile(tmp_path)),
            "--max-new-tokens", "8", "--repeats", "1", "--warmup", "0", "--json", str(dev), "--csv", str(fifo.path),
            "--history", str(hist)]  # fmt: skip
    # the second run: a directory or a full disk as its outputs
    d = tmp_path / "out"
    d.mkdir()
    full = full_device(tmp_path)
    argv2 = [*argv[:10], "--json", str(d), "--csv", str(full), "--history", str(hist)]
    # both runs in one child process (tests/cli_batch.py: the imports paid once; each run its own fleet and
    # simulators), one after the other
    p, p2 = cli_batch([argv, argv2], tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert is_chr(dev) and is_chr(hist), "a device node was replaced by a regular file"
    assert report.from_csv(fifo.join().decode())  # the CSV went through the FIFO
    assert stat.S_ISFIFO(os.lstat(fifo.path).st_mode)
    # a directory or a full disk: a clear problem, the directory untouched, the run still reported
    p = p2
    assert "Traceback" not in p.stderr
    assert f"cannot write {d}: is a directory" in p.stderr, p.stderr
    assert f"cannot write {full}: No space left on device" in p.stderr, p.stderr
    assert d.is_dir() and list(d.iterdir()) == [] and is_chr(full)


def test_todo_file_on_a_device_a_directory_and_a_full_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = null_device(tmp_path)
    assert main(["todo", "add", "discard me", "--todos", str(dev)]) == 0
    capsys.readouterr()
    assert is_chr(dev)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no .bak, .lock or temp file beside it
    d = tmp_path / "todos"
    d.mkdir()
    assert main(["todo", "list", "--todos", str(d)]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "Traceback" not in err
    full = full_device(tmp_path)  # reads never end (zeros): bounded, refused, left as it is
    assert main(["todo", "list", "--todos", str(full)]) == 2
    err = capsys.readouterr().err
    assert "not a todo file" in err and "Traceback" not in err
    assert is_chr(full)


def _limit_file_size() -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))


def test_todo_save_that_cannot_write_is_a_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    """A write that fails half way (a full disk; here a 64-byte file size limit): the old file stays whole,
    no temp file is left, the message says what happened."""
    f = tmp_path / "todos.json"
    assert main(["todo", "add", "first", "--todos", str(f)]) == 0
    before = f.read_bytes()
    argv = [sys.executable, "-m", "ddtree_tui.cli", "todo", "add", "a long item " * 10, "--todos", str(f)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, preexec_fn=_limit_file_size)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "not saved: cannot write" in p.stderr and "the file on disk is unchanged" in p.stderr, p.stderr
    assert f.read_bytes() == before
    assert not [x.name for x in tmp_path.iterdir() if x.name.endswith(".tmp")]


def test_corrupt_todo_message_names_a_backup_only_when_there_is_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "todos.json"
    f.write_text("{not json")
    assert main(["todo", "list", "--todos", str(f)]) == 2
    err = capsys.readouterr().err
    assert "todos.json.bak" not in err and "no backup" in err
    (tmp_path / "todos.json.bak").write_text(json.dumps({"todos": []}))
    assert main(["todo", "list", "--todos", str(f)]) == 2
    assert "restore todos.json.bak" in capsys.readouterr().err


@pytest.mark.slow
def test_sighup_during_run_bench_saves_and_stops_the_demo_servers(tmp_path: Path) -> None:
    """Closing the terminal (or `tmux kill-window`) sends SIGHUP: saved like Ctrl-C, no simulator left."""
    out = tmp_path / "r.json"
    err = tmp_path / "err.txt"
    argv = [sys.executable, "-m", "ddtree_tui.cli", "--run-bench", "--demo", "--profile", str(demo_profile(tmp_path)), "--repeats", "20",
            "--warmup", "0", "--max-new-tokens", "64", "--json", str(out), "--history", str(tmp_path / "h.jsonl")]  # fmt: skip
    # the demo's simulators at time scale 5 (their 1.5-2 s load among it): the run still takes seconds after
    # its second request (120 requests of 64 tokens), so the signal comes mid-run as before
    env = {**os.environ, TIME_SCALE_ENV: "5"}
    with open(err, "w") as ef:
        proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=ef, text=True, env=env)
        try:
            deadline = time.monotonic() + 30
            while "[2/" not in err.read_text() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            # the demo's simulated servers, launched through the fleet (detached, in this run's workdir)
            pidfiles = list(tmp_path.glob(".ddtree/run-bench-demo-*/run/*.json"))
            sims = [json.loads(f.read_text())["pid"] for f in pidfiles]
            assert len(sims) == 2 and all(alive(p) for p in sims), "the demo should run its simulated servers"
            proc.send_signal(signal.SIGHUP)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err.read_text()
    run = report.from_json(out.read_text())
    assert run.status == "interrupted" and len(run.results) >= 2
    deadline = time.monotonic() + 10
    while any(alive(p) for p in sims) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in sims), "simulated servers left running after SIGHUP"


def test_host_programs_write_pidfiles_and_patches_through_the_same_writer(tmp_path: Path) -> None:
    """The host side embeds the same writer: a pidfile path or a patched file that is a device is written,
    never replaced (host programs run as root on GPU hosts)."""
    from ddtree_tui import remote
    from ddtree_tui.services import patches

    dev = null_device(tmp_path)
    prog = remote.bundle(
        "import sys\nfrom ddtree_tui.remote.hostlib import write_json\nwrite_json(sys.argv[1], {'pid': 1})\n"
    )
    p = subprocess.run(
        [sys.executable, "-I", "-c", prog, str(dev)], capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 0, p.stderr
    assert is_chr(dev)
    dev2 = null_device(tmp_path, "patched")
    cfg = {"writes": [{"path": str(dev2), "text": "patched text"}]}
    p = subprocess.run([sys.executable, "-c", patches._WRITE], input=json.dumps(cfg), capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    assert p.returncode == 0 and json.loads(p.stdout)["written"] == [str(dev2)], p.stderr
    assert is_chr(dev2)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["null", "patched"]

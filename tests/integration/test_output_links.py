"""Issue 25: an output never follows a symlink another user planted. The attack: `nobody` makes a link in a
sticky world-writable directory (like /tmp) pointing at a file of ours; a run told to write its JSON there
would replace our file. Here the directory is our own 1777 directory, the links belong to `nobody` (uid
65534, set with os.lchown as root, or made by a child that setuid()s to it when we are root) and the victims
are our files; the kernel's fs.protected_symlinks plays no part because the writer resolves links itself."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddtree_tui import atomicio
from ddtree_tui.remote import source
from ddtree_tui.sim.config import TIME_SCALE_ENV
from ddtree_tui.sweep.apply import write_profile
from ddtree_tui.sweep.state import atomic_write

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="making a link owned by another user needs root"),
]
NOBODY = 65534


def nobody_link(target: Path, link: Path) -> Path:
    """A symlink owned by nobody: made by a child process that drops to nobody (the sticky directory lets
    anyone add a name)."""

    def drop() -> None:
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    # ln, not this Python: nobody may not reach the test's interpreter
    subprocess.run(["ln", "-s", str(target), str(link)], check=True, preexec_fn=drop, timeout=30)
    assert os.lstat(link).st_uid == NOBODY
    return link


@pytest.fixture
def pub() -> Iterator[Path]:
    """A sticky world-writable directory nobody can reach: a fresh one in the system temp directory (the
    test's own tmp_path is 0700), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="ddtree-links-"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_link_planted_by_another_user_is_never_followed(tmp_path: Path, pub: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    link = nobody_link(victim, pub / "out.json")
    with pytest.raises(atomicio.UntrustedLinkError, match="owned by uid 65534, not by you"):
        atomicio.write_file(link, '{"run": 1}')
    with pytest.raises(OSError, match="not followed"):
        atomic_write(link, "{}")  # the sweep's state and results writer
    with pytest.raises(OSError, match="not followed"):
        write_profile(link, 'name = "x"\n')  # sweep apply
    assert victim.read_text() == "precious" and os.path.islink(link)
    assert sorted(x.name for x in pub.iterdir()) == ["out.json"]  # no temp file left

    # a chain: our own link to nobody's link is refused too; so is nobody's link to a directory of ours
    mine = pub / "mine.json"
    mine.symlink_to(link)
    with pytest.raises(atomicio.UntrustedLinkError):
        atomicio.write_file(mine, "x")
    nobody_link(tmp_path, pub / "dir")
    with pytest.raises(atomicio.UntrustedLinkError):
        atomicio.write_file(pub / "dir" / "victim.json", "x")
    assert victim.read_text() == "precious"

    # a device of ours behind nobody's link: not written either
    dev = tmp_path / "null"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(atomicio.UntrustedLinkError):
        atomicio.write_file(nobody_link(dev, pub / "dev"), "x")

    # our own links are followed as before (the link kept, its target replaced), /dev/stdout too
    ours = pub / "ours.json"
    ours.symlink_to(victim)
    atomicio.write_file(ours, "new")
    assert victim.read_text() == "new" and ours.is_symlink()
    p = subprocess.run([sys.executable, "-c", "from ddtree_tui import atomicio; atomicio.write_file('/dev/stdout', 'out')"],
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert p.returncode == 0 and p.stdout == "out", p.stderr
    redirected = tmp_path / "stdout.txt"
    with open(redirected, "w") as f:  # /dev/stdout redirected to a file: that file gets the output
        subprocess.run([sys.executable, "-c", "from ddtree_tui import atomicio; atomicio.write_file('/dev/stdout', 'out')"],
                       stdout=f, check=True, timeout=30)  # fmt: skip
    assert redirected.read_text() == "out"


def test_the_host_side_writer_refuses_it_too(tmp_path: Path, pub: Path) -> None:
    """remote/atomicio.py as a host runs it: its own source in `python -I` (stdlib only)."""
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    link = nobody_link(victim, pub / "pidfile.json")
    prog = source("atomicio") + "\nimport sys\nwrite_file(sys.argv[1], 'x')\n"
    p = subprocess.run(
        [sys.executable, "-I", "-c", prog, str(link)], capture_output=True, text=True, timeout=30
    )
    assert p.returncode != 0 and "UntrustedLinkError" in p.stderr and "not followed" in p.stderr, p.stderr
    assert victim.read_text() == "precious"


@pytest.mark.slow
def test_run_bench_json_through_a_planted_link_is_refused_and_reported(tmp_path: Path, pub: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    link = nobody_link(victim, pub / "r.json")
    hist = nobody_link(victim, pub / "h.jsonl")  # the history is appended to, not replaced: refused too
    argv = [sys.executable, "-m", "ddtree_tui.cli", "--run-bench", "--demo", "--max-new-tokens", "8",
            "--repeats", "1", "--warmup", "0", "--json", str(link), "--history", str(hist)]  # fmt: skip
    # the demo's simulators fast-forwarded (their 2 s load among it): what is checked is where the run writes
    env = {**os.environ, TIME_SCALE_ENV: "10"}
    p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=90, env=env)
    assert f"cannot write {link}" in p.stderr and "not followed" in p.stderr, p.stderr[-2000:]
    # the history line is the fleet's bench desk's: it says so as a warning (the run's own files are above)
    assert "bench history not written" in p.stderr and "not followed" in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr  # (its exit status is another finding of issue 25)
    assert victim.read_text() == "precious"

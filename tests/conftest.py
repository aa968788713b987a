from __future__ import annotations

import json
import os
import resource
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.durations import estimates
from tests.procs import SessionProcesses, describe, kill_all
from tests.sshd import SSHD, SshEnv

FIXTURES = Path(__file__).parent / "fixtures"


# a test that uses one of these fixtures gets the marker, so `-m "not sshd"` needs no list kept by hand
MARKER_OF_FIXTURE = {"ssh_env": "sshd", "sshd": "sshd", "prometheus": "prometheus"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for name in sorted(
            {MARKER_OF_FIXTURE[f] for f in getattr(item, "fixturenames", ()) if f in MARKER_OF_FIXTURE}
        ):
            item.add_marker(name)
    # The long tests first, by a stable sort (each module keeps its own order otherwise): xdist hands tests out
    # in this order, so a minute-long story starts at once instead of being the last one left running while
    # the other workers sit idle. Longest by tests/durations.json (tests/durations.py: an xdist_group ranked by
    # its sum, as it runs on one worker), then the slow and browser ones. It changes the wall time of a
    # parallel run, never what a test does.
    est = estimates([item.nodeid for item in items])
    group_of = {item.nodeid: _xdist_group(item) for item in items}
    group_sum: dict[str, float] = {}
    for nid, g in group_of.items():
        if g is not None:
            group_sum[g] = group_sum.get(g, 0.0) + est[nid]

    def longest_first(item: pytest.Item) -> tuple[float, bool]:
        g = group_of[item.nodeid]
        seconds = group_sum[g] if g is not None else est[item.nodeid]
        return -seconds, not any(item.get_closest_marker(m) for m in ("slow", "browser"))

    items.sort(key=longest_first)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With DDTREE_TEST_CPU_LOG=FILE, one JSON line per test (setup + call + teardown): its CPU in this process
    and in the children it waited for, its wall span and its worker, for benchmarks/test_cpu.py (issue 24:
    where the suite's CPU goes, and which worker is left running at the end). Unset, nothing is measured."""
    path = os.environ.get("DDTREE_TEST_CPU_LOG")
    if not path:
        yield
        return
    own0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    yield
    t1 = time.time()
    own1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    line = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "start": t0,
        "end": t1,
        "own_cpu_s": own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime,
        "children_cpu_s": kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime,
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _xdist_group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", ""))


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail the run if any process it started (children, grandchildren, daemons that left their parent) is
    still alive when it ends; they are killed then, so a failed run leaves nothing behind either. Under
    pytest-xdist each worker checks its own."""
    watch = SessionProcesses(tmp_path_factory.getbasetemp())
    yield
    left = watch.wait_left()
    if left:
        text = describe(left)
        kill_all(left)
        pytest.fail(f"{len(left)} process(es) started by the tests outlived the test session:\n{text}")


@pytest.fixture
def ssh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshEnv]:
    """A temp HOME with ssh client config; add servers with `ssh_env.add_server(alias)`."""
    if not (shutil.which("sshd") or Path(SSHD).exists()):
        pytest.fail("OpenSSH sshd is not installed: run scripts/test, which installs openssh-server")
    env = SshEnv(tmp_path)
    monkeypatch.setenv("HOME", str(env.home))
    yield env
    env.stop()


@pytest.fixture
def sshd(ssh_env: SshEnv):
    """One real sshd on 127.0.0.1, trusted in known_hosts, reachable as the alias 'testhost'."""
    return ssh_env.add_server("testhost")

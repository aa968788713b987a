"""remote/listener.py run exactly as sent (`python -I -c SOURCE`, the request on stdin): who holds a
service's port, against a pidfile that names a real child process of this test (its own session, so its
process group is its own). A stranger sharing the port (SO_REUSEPORT) makes it foreign even while our
process listens too; our process without a socket is "no-listener"; nothing of ours and nothing listening is
"stopped"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddtree_tui.remote import source
from ddtree_tui.services.identity import ListenerReply, identity_of
from ddtree_tui.services.launchline import argv_hash
from tests.fixtures.services.support import starttime
from tests.util import free_port

SERVE = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
    "if int(sys.argv[1]):\n"
    "    s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(4)\n"
    "print('up', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    wd = tmp_path / "wd"
    for d in (wd, wd / "run", wd / "logs"):
        d.mkdir(mode=0o700)
    return wd


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def child(request: pytest.FixtureRequest, port: int) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """Our service: a child in a session of its own, listening on the port (or not, when parametrized 0)."""
    listen = getattr(request, "param", True)
    argv = [sys.executable, "-c", SERVE, str(port if listen else 0)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "up"
        yield p, argv
    finally:
        p.kill()
        p.wait()


def _ask(workdir: Path, port: int, rec: dict[str, Any] | None, accept: list[str]) -> ListenerReply:
    pidfile = workdir / "run" / "svc.json"
    if rec is not None:
        pidfile.write_text(json.dumps(rec))
    req = {
        "workdir": str(workdir), "pidfile": str(pidfile), "exitfile": str(workdir / "run" / "svc.exit"),
        "stopping": str(workdir / "run" / "svc.stopping"), "log": str(workdir / "logs" / "svc.log"),
        "accept": accept, "port": port,
    }  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-I", "-c", source("listener")], input=json.dumps(req), capture_output=True,
        text=True, timeout=30, check=True,
    )  # fmt: skip
    return ListenerReply.model_validate(json.loads(out.stdout.strip().splitlines()[-1]))


def _rec(p: subprocess.Popen[str], argv: list[str], port: int) -> dict[str, Any]:
    return {"pid": p.pid, "pgid": p.pid, "starttime": starttime(p.pid), "argv": argv,
            "argv_hash": argv_hash(argv), "port": port, "started_at": 0}  # fmt: skip


def test_our_process_group_on_the_port_is_ours_until_a_stranger_shares_it(
    workdir: Path, port: int, child: tuple[subprocess.Popen[str], list[str]]
) -> None:
    p, argv = child
    r = _ask(workdir, port, _rec(p, argv, port), [argv_hash(argv)])
    assert (r.result, r.holders, r.pid) == ("ours", [p.pid], p.pid)
    assert identity_of("loc/svc", r).verified

    # not in accept (a command we did not start): never ours, whoever it is
    r = _ask(workdir, port, None, [])
    assert r.result == "foreign" and r.service == "foreign"

    stranger = socket.socket()
    stranger.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    stranger.bind(("127.0.0.1", port))
    stranger.listen(4)
    try:
        r = _ask(workdir, port, None, [argv_hash(argv)])
        assert r.result == "foreign" and r.service == "ours" and os.getpid() in r.holders
        ident = identity_of("loc/svc", r)
        assert not ident.verified and ident.refusal() is not None
        assert "not by the process group we launched" in (ident.reason or "")
    finally:
        stranger.close()


@pytest.mark.parametrize("child", [False], indirect=True)
def test_our_process_without_a_socket_is_no_listener_and_nothing_is_stopped(
    workdir: Path, port: int, child: tuple[subprocess.Popen[str], list[str]]
) -> None:
    p, argv = child
    r = _ask(workdir, port, _rec(p, argv, port), [argv_hash(argv)])
    assert r.result == "no-listener" and r.holders == []
    assert (
        identity_of("loc/svc", r).reason
        == f"loc/svc runs (pid {p.pid}) but nothing listens on port {port} yet"
    )
    (workdir / "run" / "svc.json").unlink()
    r = _ask(workdir, port, None, [])
    assert (r.result, r.service) == ("stopped", "absent")
    assert identity_of("loc/svc", r).verdict == "stopped"

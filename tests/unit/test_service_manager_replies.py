"""ServiceManager at the host-program boundary: what it sends (one JSON request on stdin) and what a reply of
the wrong shape becomes (a clear error, never a KeyError), with a scripted transport and no processes."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path

from ddtree_tui.config import HostProfile, parse_profile
from ddtree_tui.services import hostscripts
from ddtree_tui.services.lifecycle import ServiceManager
from ddtree_tui.transport.base import Argv, Env, RunResult
from ddtree_tui.transport.local import LocalTransport
from tests.fixtures.services.support import profile_toml, service_toml


class Scripted(LocalTransport):
    """Answers every host program with a canned stdout (nothing runs); records the requests it was sent."""

    def __init__(self, profile: HostProfile, replies: dict[str, str]) -> None:
        super().__init__(profile)
        self.replies = replies
        self.sent: list[tuple[str, object]] = []

    def _which(self, argv: Argv) -> str:
        progs = {hostscripts.WATCH: "watch", hostscripts.LAUNCH: "launch", hostscripts.KILL: "kill",
                 hostscripts.READ_LOG: "read_log"}  # fmt: skip
        return next((progs[a] for a in argv if a in progs), argv[0])

    async def run(
        self, argv: Argv, *, timeout: float | None = 30.0, input: str | None = None, env: Env = None
    ) -> RunResult:
        name = self._which(argv)
        self.sent.append((name, json.loads(input) if input else None))
        out = self.replies.get(name, "")
        return RunResult(argv=list(argv), exit_status=0, stdout=out, stderr="", duration_s=0.0)

    async def stream(
        self, argv: Argv, *, input: str | None = None, env: Env = None, stderr: bool = False
    ) -> AsyncGenerator[str, None]:
        for line in self.replies.get(self._which(argv), "").splitlines():
            yield line


def _manager(tmp_path: Path, replies: dict[str, str]) -> tuple[ServiceManager, Scripted]:
    prof = parse_profile(profile_toml("h", "localhost", tmp_path, service_toml("a", 39999)))
    t = Scripted(prof, replies)
    return ServiceManager(t, prof, health_timeout=0.2), t


async def test_the_watcher_gets_its_request_on_stdin_and_a_good_reply_sets_the_state(tmp_path: Path) -> None:
    m, t = _manager(tmp_path, {"watch": 'noise\n{"ts": 1, "services": {"a": {"present": false}}}\n'})
    await m.refresh()
    assert m.status("a").state == "stopped"
    name, req = t.sent[0]
    assert name == "watch" and isinstance(req, dict) and req["once"] is True
    assert [s["name"] for s in req["services"]] == ["a"]
    assert req["services"][0]["pidfile"].endswith("run/a.json")


async def test_a_malformed_watch_reply_is_a_clear_error(tmp_path: Path) -> None:
    m, _ = _manager(tmp_path, {"watch": '{"services": {"a": [1, 2]}}\n'})
    await m.refresh()
    st = m.status("a")
    assert st.state == "unknown"
    assert st.detail is not None and "remote/watch.py" in st.detail and "wrong shape" in st.detail


async def test_a_malformed_kill_reply_is_refused_with_the_program_named(tmp_path: Path) -> None:
    m, _ = _manager(tmp_path, {"kill": '{"ok": true}\n', "watch": '{"services": {}}\n'})
    r = await m.kill("a")
    assert not r.ok
    assert "remote/kill.py on h sent a reply of the wrong shape (result" in r.message


async def test_read_log_sends_the_path_and_count_on_stdin(tmp_path: Path) -> None:
    m, t = _manager(tmp_path, {"read_log": '{"lines": ["one", "two"]}\n'})
    assert await m.read_log("a", 2) == ["one", "two"]
    name, req = t.sent[-1]
    assert (
        name == "read_log" and isinstance(req, dict) and req["lines"] == 2 and req["path"].endswith("a.log")
    )

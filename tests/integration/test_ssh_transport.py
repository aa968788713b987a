"""SshTransport against a real OpenSSH sshd on 127.0.0.1 (tests/sshd.py): commands, streams, forwards, host
keys, timeouts, reconnects, and that a cancelled command leaves nothing running on the host."""

from __future__ import annotations

import asyncio
import http.server
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncssh
import psutil
import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.model.snapshot import ConnStatus
from ddtree_tui.transport import make_transport
from ddtree_tui.transport.base import TransportError
from ddtree_tui.transport.ssh import SshTransport
from tests import httpc
from tests.procs import alive, procs_with, sleep_marker, wait_gone, wait_present
from tests.sshd import SshdServer, SshEnv
from tests.util import BUSY_SLACK_S, first_lines_then_cancel, free_port, serve_http

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(60)]


def transport(ssh_env: SshEnv, alias: str, extra: str = "") -> SshTransport:
    t = make_transport(parse_profile(ssh_env.profile_toml(alias, extra=extra)))
    assert isinstance(t, SshTransport)
    t.backoff_base, t.backoff_max = 0.1, 0.4  # reconnect fast in tests
    return t


@pytest.fixture
async def host(ssh_env: SshEnv, sshd: SshdServer) -> AsyncIterator[SshTransport]:
    t = transport(ssh_env, "testhost")
    await t.start()
    assert await t.wait_connected(10), t.status
    yield t
    await t.close()


async def wait_state(t: SshTransport, state: str, timeout: float = 10.0) -> ConnStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if t.status.state == state:
            return t.status
        await asyncio.sleep(0.02)
    raise AssertionError(f"state stayed {t.status}")


# --- commands -----------------------------------------------------------------------------------------------


async def test_run_exit_status_stdout_stderr_env(host: SshTransport) -> None:
    r = await host.run(["sh", "-c", 'echo "out:$FOO"; echo err >&2; exit 3'], env={"FOO": "a b $x"})
    assert r.exit_status == 3
    assert r.stdout == "out:a b $x\n"
    assert r.stderr == "err\n"
    assert not r.timed_out and not r.ok
    ok = await host.run(["true"])
    assert ok.ok and ok.exit_status == 0


async def test_run_input_reaches_stdin_exactly(host: SshTransport) -> None:
    text = "line one\nünïcode ✓\nno newline at the end"
    r = await host.run(["cat"], input=text)
    assert r.ok and r.stdout == text
    # a command that ignores its input still finishes
    r2 = await host.run(["echo", "done"], input="x" * 200_000)
    assert r2.ok and r2.stdout == "done\n"


async def test_run_killed_by_signal_has_no_exit_status(host: SshTransport) -> None:
    r = await host.run(["sh", "-c", "kill -TERM $$"])
    assert r.exit_status is None and not r.timed_out


async def test_injection_stays_literal(host: SshTransport, tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    evil = f"x; touch {pwned}"
    r = await host.run(["echo", evil, "$(touch " + str(pwned) + ")", "`id`", "'"])
    assert r.ok
    assert r.stdout == f"{evil} $(touch {pwned}) `id` '\n"
    assert not pwned.exists()
    r2 = await host.run(["printenv", "V"], env={"V": f"; touch {pwned}"})
    assert r2.stdout == f"; touch {pwned}\n" and not pwned.exists()


async def test_run_timeout_kills_remote_process(host: SshTransport) -> None:
    m = sleep_marker()
    t0 = time.monotonic()
    r = await host.run(["sh", "-c", f"sleep {m}; echo never"], timeout=0.5)
    assert r.timed_out and r.exit_status is None
    assert time.monotonic() - t0 < 0.5 + BUSY_SLACK_S
    assert await wait_gone(m) == []


async def test_stream_lines_and_stderr(host: SshTransport) -> None:
    lines = [line async for line in host.stream(["sh", "-c", "echo a; echo b >&2; printf 'c\\r\\nd'"])]
    assert lines == ["a", "c", "d"]
    merged = [ln async for ln in host.stream(["sh", "-c", "echo a; echo b >&2; echo c"], stderr=True)]
    assert sorted(merged) == ["a", "b", "c"]


async def test_missing_program(host: SshTransport) -> None:
    r = await host.run(["definitely-not-a-program-xyz", "a"])
    assert r.exit_status == 127 and "not found" in r.stderr
    with pytest.raises(TransportError, match="cannot start 'definitely-not-a-program-xyz': not found"):
        async for _ in host.stream(["definitely-not-a-program-xyz"]):
            pass


async def test_stream_input_program(host: SshTransport) -> None:
    prog = "import sys\nfor i in range(3):\n    print('tick', i, flush=True)\n"
    lines = [ln async for ln in host.stream(["python3", "-"], input=prog)]
    assert lines == ["tick 0", "tick 1", "tick 2"]


async def test_stream_cancel_kills_remote_process(host: SshTransport) -> None:
    m = sleep_marker()
    got = await first_lines_then_cancel(
        host.stream(["sh", "-c", f"echo ready; sleep {m}"]), lambda: wait_present(m), timeout=2
    )
    assert got == ["ready"]
    assert await wait_gone(m) == [], "the remote sleep outlived the cancelled stream"


async def test_stream_aclose_kills_a_silent_remote_loop(host: SshTransport) -> None:
    m = sleep_marker()
    # prints once, then loops without writing: closing the channel alone would not end it
    agen = host.stream(["sh", "-c", f"echo go; while :; do sleep {m}; done"])
    assert await agen.__anext__() == "go"
    await wait_present(m)
    await agen.aclose()
    assert await wait_gone(m) == []


async def test_connection_drop_kills_remote_process(host: SshTransport, sshd: SshdServer) -> None:
    """When the connection dies (not a clean close), the host still ends what we started."""
    m = sleep_marker()
    agen = host.stream(["sh", "-c", f"echo go; sleep {m}"])
    assert await agen.__anext__() == "go"
    await wait_present(m)
    listener = psutil.Process(sshd.proc.pid)  # type: ignore[union-attr]
    sessions = [c for c in listener.children() if c.pid not in {p.pid for p in procs_with(m)}]
    assert sessions
    for s in sessions:  # the per-connection sshd: the TCP connection drops, the listener stays
        s.kill()
    with pytest.raises(TransportError):
        await agen.__anext__()
    assert await wait_gone(m) == []
    assert await host.wait_connected(10)


# --- port forwarding ----------------------------------------------------------------------------------------


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[int]:
    with serve_http(_Hello) as port:
        yield port


async def test_forward_port_reaches_http_server(host: SshTransport, http_server: int) -> None:
    port = await host.forward_port(http_server)
    assert port != http_server
    assert await host.forward_port(http_server) == port  # one listener per remote port
    async with httpc.AClient(timeout=5) as client:
        for i in range(3):  # keep-alive: one TCP connection, one channel
            r = await client.get(f"http://127.0.0.1:{port}/x{i}")
            assert r.status_code == 200 and r.text == f"hello /x{i}"


async def test_forward_to_closed_port_closes_the_connection(host: SshTransport) -> None:
    port = await host.forward_port(free_port())
    async with httpc.AClient(timeout=5) as client:
        with pytest.raises(httpc.ERRORS):
            await client.get(f"http://127.0.0.1:{port}/")


# --- host keys ----------------------------------------------------------------------------------------------


async def test_unknown_host_key_refused_when_strict(ssh_env: SshEnv) -> None:
    srv = ssh_env.add_server("stranger", trust=False)
    t = transport(ssh_env, "stranger")
    await t.start()
    try:
        assert not await t.wait_connected(1.0)
        st = await wait_state(t, "disconnected")
        assert f"host key for [127.0.0.1]:{srv.port} is not in known_hosts (strict)" in (st.error or "")
        assert 'known_hosts = "accept-new"' in (st.error or "")
        assert st.next_retry_at is not None
        with pytest.raises(TransportError, match="not connected: host key"):
            await t.run(["true"])
        assert f"{srv.port}" not in ssh_env.known_hosts.read_text()
    finally:
        await t.close()


async def test_accept_new_records_unknown_key(ssh_env: SshEnv) -> None:
    srv = ssh_env.add_server("newhost", trust=False)
    t = transport(ssh_env, "newhost", extra='known_hosts = "accept-new"\n')
    await t.start()
    try:
        assert await t.wait_connected(10), t.status
        assert (await t.run(["echo", "hi"])).stdout == "hi\n"
    finally:
        await t.close()
    assert srv.host_key_line() in ssh_env.known_hosts.read_text().splitlines()
    # and now it is known: strict accepts it
    t2 = transport(ssh_env, "newhost")
    await t2.start()
    try:
        assert await t2.wait_connected(10), t2.status
    finally:
        await t2.close()


async def test_changed_key_refused_even_with_accept_new(ssh_env: SshEnv) -> None:
    srv = ssh_env.add_server("changed", trust=False)
    algo, blob = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2]
    stale = f"[127.0.0.1]:{srv.port} {algo} {blob}\n"
    with ssh_env.known_hosts.open("a") as f:
        f.write(stale)
    before = ssh_env.known_hosts.read_text()
    t = transport(ssh_env, "changed", extra='known_hosts = "accept-new"\n')
    await t.start()
    try:
        assert not await t.wait_connected(1.0)
        st = await wait_state(t, "disconnected")
        assert f"host key for [127.0.0.1]:{srv.port} does not match" in (st.error or "")
        assert ssh_env.known_hosts.read_text() == before
    finally:
        await t.close()


# --- failures, timeouts and reconnection --------------------------------------------------------------------


async def test_refused_connection_fails_fast(ssh_env: SshEnv, sshd: SshdServer) -> None:
    # fast: well before the connect timeout (long, so a busy machine cannot blur the two)
    t = transport(ssh_env, "testhost", extra=f"port = {free_port()}\nconnect_timeout = 30\n")
    t0 = time.monotonic()
    await t.start()
    try:
        st = await wait_state(t, "disconnected", timeout=15)
        assert time.monotonic() - t0 < 15
        assert "connection refused" in (st.error or "")
        with pytest.raises(TransportError, match=r"testhost: not connected: connection refused"):
            await t.run(["true"])
    finally:
        await t.close()


async def test_silent_server_hits_connect_timeout(ssh_env: SshEnv, sshd: SshdServer) -> None:
    """A port that accepts TCP but never speaks SSH: the connect timeout, not a hang."""
    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(8)
        port = blackhole.getsockname()[1]
        t = transport(ssh_env, "testhost", extra=f"port = {port}\nconnect_timeout = 0.5\n")
        t0 = time.monotonic()
        await t.start()
        try:
            st = await wait_state(t, "disconnected", timeout=0.5 + BUSY_SLACK_S)
            assert 0.4 < time.monotonic() - t0 < 0.5 + BUSY_SLACK_S
            assert "timed out after 0.5 s" in (st.error or "")
        finally:
            await t.close()


async def test_sshd_killed_mid_stream_then_restarted(
    host: SshTransport, sshd: SshdServer, http_server: int
) -> None:
    states: list[ConnStatus] = []
    host.add_listener(states.append)
    fwd = await host.forward_port(http_server)
    agen = host.stream(["sh", "-c", "while :; do echo tick; sleep 0.05; done"])
    assert await agen.__anext__() == "tick"
    sshd.stop()
    with pytest.raises(TransportError):
        async for _ in agen:
            pass
    st = await wait_state(host, "disconnected", timeout=5)
    assert st.error and "connection lost" in st.error
    assert st.next_retry_at is not None and st.next_retry_at >= st.since
    with pytest.raises(TransportError, match="not connected"):
        await host.run(["true"])
    async with httpc.AClient(timeout=3) as client:  # the forward fails fast while down
        with pytest.raises(httpc.ERRORS):
            await client.get(f"http://127.0.0.1:{fwd}/")
    sshd.start()  # same port, same keys: no user action needed
    assert await host.wait_connected(10), host.status
    assert (await host.run(["echo", "back"])).stdout == "back\n"
    async with httpc.AClient(timeout=5) as client:  # same local port as before
        assert (await client.get(f"http://127.0.0.1:{fwd}/again")).text == "hello /again"
    seen = [s.state for s in states]
    assert "disconnected" in seen and seen[-1] == "connected"


async def test_profile_user_overrides_ssh_config(ssh_env: SshEnv, sshd: SshdServer) -> None:
    """user = "nobody" wins over the config's User (sshd refuses nobody); auth failures are retried and the
    error stays visible while they are."""
    t = transport(ssh_env, "testhost", extra='user = "nobody"\n')
    states: list[ConnStatus] = []
    t.add_listener(states.append)
    await t.start()
    try:
        assert not await t.wait_connected(1.5)
        st = await wait_state(t, "disconnected")
        assert "authentication failed" in (st.error or "") and "nobody" in (st.error or "")
        retries = [s for s in states if s.state == "connecting" and s.attempts > 0]
        assert len(retries) >= 2 and all("authentication failed" in (s.error or "") for s in retries)
    finally:
        await t.close()


async def test_proxyjump_from_ssh_config(ssh_env: SshEnv, sshd: SshdServer) -> None:
    jump = ssh_env.add_server("jump")
    cfg = ssh_env.ssh_dir / "config"
    cfg.write_text(
        cfg.read_text()
        + f"""
Host viajump
    HostName 127.0.0.1
    Port {sshd.port}
    User {sshd.user}
    IdentityFile {ssh_env.user_key}
    UserKnownHostsFile {ssh_env.known_hosts}
    ProxyJump jump
"""
    )
    t = transport(ssh_env, "viajump")
    await t.start()
    try:
        assert await t.wait_connected(10), t.status
        assert (await t.run(["echo", "hop"])).stdout == "hop\n"
        jumped = [c for c in psutil.Process(jump.proc.pid).children() if alive(c)]  # type: ignore[union-attr]
        assert jumped, "the connection did not go through the jump host"
    finally:
        await t.close()

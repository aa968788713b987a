"""LocalTransport: real child processes; a timeout or a cancel ends the whole process group."""

from __future__ import annotations

import time

import pytest

from ddtree_tui.config import parse_profile
from ddtree_tui.transport import make_transport
from ddtree_tui.transport.base import TransportError
from ddtree_tui.transport.local import LocalTransport
from tests.procs import sleep_marker, wait_gone, wait_present
from tests.util import BUSY_SLACK_S, first_lines_then_cancel

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def local() -> LocalTransport:
    t = make_transport(parse_profile('name = "me"\naddress = "local"\n'))
    assert isinstance(t, LocalTransport)
    await t.start()
    assert await t.wait_connected(1) and t.status.state == "connected"
    return t


async def test_run_status_output_env_input(local: LocalTransport) -> None:
    r = await local.run(["sh", "-c", 'echo "o:$FOO"; echo e >&2; exit 4'], env={"FOO": "x; y"})
    assert (r.exit_status, r.stdout, r.stderr, r.timed_out) == (4, "o:x; y\n", "e\n", False)
    r = await local.run(["cat"], input="ab\nc")
    assert r.ok and r.stdout == "ab\nc"
    r = await local.run(["echo", "x; touch nothing", "$HOME"])
    assert r.stdout == "x; touch nothing $HOME\n"


async def test_run_missing_program(local: LocalTransport) -> None:
    r = await local.run(["definitely-not-a-program-xyz"])
    assert r.exit_status == 127 and "cannot start" in r.stderr


async def test_run_timeout_kills_the_group(local: LocalTransport) -> None:
    a, b = sleep_marker(), sleep_marker()
    t0 = time.monotonic()
    r = await local.run(["sh", "-c", f"sleep {a} & sleep {b}; echo never"], timeout=0.5)
    assert r.timed_out and r.exit_status is None
    assert time.monotonic() - t0 < 0.5 + BUSY_SLACK_S
    assert await wait_gone(a) == [] and await wait_gone(b) == []  # the backgrounded child too


async def test_stream_lines(local: LocalTransport) -> None:
    lines = [ln async for ln in local.stream(["sh", "-c", "echo a; echo b >&2; printf 'c\\r\\nd'"])]
    assert lines == ["a", "c", "d"]
    merged = [ln async for ln in local.stream(["sh", "-c", "echo a; echo b >&2"], stderr=True)]
    assert sorted(merged) == ["a", "b"]
    prog = [ln async for ln in local.stream(["python3", "-"], input="print(6 * 7)\n")]
    assert prog == ["42"]


async def test_stream_cancel_kills_the_group(local: LocalTransport) -> None:
    a, b = sleep_marker(), sleep_marker()

    async def both_sleeping() -> None:
        await wait_present(a, argv0="sleep")
        await wait_present(b, argv0="sleep")

    got = await first_lines_then_cancel(
        local.stream(["sh", "-c", f"sleep {a} & echo go; sleep {b}"]), both_sleeping
    )
    assert got == ["go"]
    assert await wait_gone(a) == [] and await wait_gone(b) == []


async def test_stream_aclose_kills_a_process_that_ignores_term(local: LocalTransport) -> None:
    a = sleep_marker()
    agen = local.stream(["sh", "-c", f"trap '' TERM; echo go; sleep {a}; sleep {a}"])
    assert await agen.__anext__() == "go"
    await wait_present(a, argv0="sleep")
    await agen.aclose()
    assert await wait_gone(a, timeout=5) == []


async def test_stream_missing_program_raises(local: LocalTransport) -> None:
    with pytest.raises(TransportError, match="cannot start"):
        async for _ in local.stream(["definitely-not-a-program-xyz"]):
            pass


async def test_forward_port_is_identity(local: LocalTransport) -> None:
    assert await local.forward_port(30010) == 30010

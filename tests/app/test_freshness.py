"""Live values age (issue 29): a simulated server decodes, then goes idle and stops reporting its decode
numbers; six minutes later (an injected clock shared by the fleet and the app, so nobody waits six minutes)
the services pane shows its last throughput and accept length dimmed with their age, while what is still
observed (the health probe, /metrics' running count) is shown as it is. `status --json` carries the times."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import DataTable

from ddtree_tui.config import load_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.services.sglang_metrics import parse_sglang_metrics
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.details import service_facts
from tests import httpc
from tests.app.screen_text import until
from tests.fixtures.services.support import cleanup_workdir
from tests.util import free_port


def _profile(path: Path, work: Path, port: int) -> None:
    path.write_text(
        f'name = "here"\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{work}"\n'
        '[telemetry]\nsource = "none"\n\n'
        f'[[service]]\nname = "sim"\nalgorithm = "dflash"\nlauncher = "sim"\nport = {port}\n'
        "[service.sim]\ndecode_rate = 400.0\nload_time = 0.1\n"
    )


def _cell(app: DDTreeApp, ref: str, column: str) -> str | Text:
    table = app.pane(3).query_one(DataTable)
    key = next(k for k, c in table.columns.items() if str(c.label) == column)
    value: str | Text = table.get_cell(ref, key)
    return value


def _dimmed_with_age(app: DDTreeApp, ref: str, column: str) -> bool:
    v = _cell(app, ref, column)
    return isinstance(v, Text) and "ago" in v.plain and v.style == app.pane(3).style_of("dim")


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_an_idle_servers_last_numbers_are_dimmed_with_their_age(tmp_path: Path) -> None:
    prof, work, port = tmp_path / "here.toml", tmp_path / "w", free_port()
    _profile(prof, work, port)
    skew = [0.0]  # seconds the injected clock runs ahead of the real one

    def clock() -> float:
        return time.time() + skew[0]

    fleet = Fleet([load_profile(prof)], todos_path=tmp_path / "t.json", history_path=tmp_path / "h.jsonl",
                  probe_interval=0.3, clock=clock)  # fmt: skip
    app = DDTreeApp(fleet, refresh_hz=10, clock=clock)
    ref = "here/sim"
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            r = await fleet.launch(ref)
            assert r.ok, r.message
            await until(pilot, lambda: fleet.snapshot().service("here", "sim").state == "ready", 30, "ready")
            async with httpc.AClient(timeout=30) as client:
                body = {"text": "tell me a story", "sampling_params": {"max_new_tokens": 400}}
                res = await client.post(f"http://127.0.0.1:{port}/generate", json=body)
                assert res.status_code == 200, res.text
                # the server's last decode-batch update may land just after the response: read /metrics until
                # two reads half a second apart agree (the figure it then keeps while idle)
                gauges = None
                for _ in range(20):
                    prev = gauges
                    gauges = parse_sglang_metrics((await client.get(f"http://127.0.0.1:{port}/metrics")).text)
                    if (
                        prev is not None
                        and gauges is not None
                        and prev.gen_throughput == gauges.gen_throughput
                    ):
                        break
                    await asyncio.sleep(0.5)
            assert gauges is not None and gauges.gen_throughput

            def decoded() -> Any:
                """The fleet shows the figure /metrics keeps (to its rounding: the log prints 2 decimals,
                /metrics 3), from whichever source it read first. /server_info and /metrics are read every
                fifth probe: the jump below may come before or after their first read since the decode, and
                either way the figure is as old as the decode (the unit test of observed_times has both)."""
                s = fleet.snapshot().service("here", "sim")
                return (
                    s
                    and s.gen_throughput is not None
                    and abs(s.gen_throughput - gauges.gen_throughput) <= 0.006
                    and "gen_throughput" in s.observed_at
                )

            await until(pilot, decoded, 30, "the throughput /metrics keeps")

            def log_read() -> bool:
                """The fleet has read the server's last decode line too: one read only after the clock jump
                below is a new observation of the figure, at the new time (seen once in a full run)."""
                text = (work / "logs" / "sim.log").read_text(encoding="utf-8", errors="replace")
                decodes = [ln for ln in text.splitlines() if "Decode batch" in ln]
                return not decodes or decodes[-1] in fleet.log_lines(ref)

            await until(pilot, log_read, 30, "the fleet reading the last decode line")
            await until(pilot, lambda: _cell(app, ref, "Gen tok/s") not in ("-", ""), 10, "the throughput")
            assert not _dimmed_with_age(app, ref, "Gen tok/s")  # just observed: as it is

            skew[0] = 363.0  # six minutes pass with no request: the server prints no decode line
            await until(pilot, lambda: _dimmed_with_age(app, ref, "Gen tok/s"), 20, "the throughput aged")
            assert _dimmed_with_age(app, ref, "Accept")
            text = _cell(app, ref, "Gen tok/s")
            assert isinstance(text, Text) and text.plain.endswith(" ago") and "6m" in text.plain

            # the health probe and /metrics' running count go on being observed: as they are
            def probed_again() -> bool:
                s = fleet.snapshot().service("here", "sim")
                return s is not None and s.observed_at.get("running_reqs", 0) > time.time() + 300

            await until(pilot, probed_again, 20, "a /metrics read at the new time")
            await until(pilot, lambda: not _dimmed_with_age(app, ref, "Health"), 10, "a fresh health probe")
            s = fleet.snapshot().service("here", "sim")
            assert s is not None
            facts = dict(service_facts(s, clock()))
            assert facts["running / queued"] == "0 / 0"  # read now, not the last decode line's count
            assert "stale, 6m" in facts["gen throughput"]
            await app.action_quit()
    finally:
        await asyncio.wait_for(fleet.stop(), 20)
        cleanup_workdir(work)


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_status_json_says_when_each_live_value_was_observed(tmp_path: Path) -> None:
    """`status --json` of a running server: each service value has its time in `observed_at` (schema 1)."""
    prof, work, port = tmp_path / "here.toml", tmp_path / "w", free_port()
    _profile(prof, work, port)
    cli = [sys.executable, "-m", "ddtree_tui.cli", "--profile", str(prof)]
    try:
        up = subprocess.run(
            [*cli, "launch", "here/sim"], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert up.returncode == 0, up.stderr
        before = time.time()
        doc: dict[str, Any] = {}
        for _ in range(50):
            p = subprocess.run([*cli, "status", "--json"], cwd=tmp_path, capture_output=True, text=True,
                               timeout=60)  # fmt: skip
            assert p.returncode == 0, p.stderr
            doc = json.loads(p.stdout)
            [svc] = doc["hosts"][0]["services"]
            if svc["state"] == "ready" and "health_latency_ms" in svc["observed_at"]:
                break
            time.sleep(0.2)
        assert doc["schema"] == 1
        [svc] = doc["hosts"][0]["services"]
        assert svc["state"] == "ready", svc
        seen = svc["observed_at"]
        assert set(seen) <= {"accept_length", "accept_rate", "gen_throughput", "running_reqs", "queue_reqs",
                             "token_usage", "health_latency_ms"}  # fmt: skip
        assert before <= seen["health_latency_ms"] <= doc["ts"] + 1
        assert "running_reqs" in seen and before <= seen["running_reqs"] <= doc["ts"] + 1
    finally:
        subprocess.run([*cli, "kill", "here/sim"], cwd=tmp_path, capture_output=True, timeout=60)
        cleanup_workdir(work)

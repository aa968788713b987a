"""Record a live demo session from the TUI (`--record`), replay it (`--replay`): the replayed fleet, rendered,
gives the very screens the live fleet gave at the same recorded instant; the replay is labelled REPLAY."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ddtree_tui.collector.recording import Recorder, RecordingError, RecordingFleet, ReplayFleet, read_records
from ddtree_tui.config import load_profile, packaged_demo_profile
from ddtree_tui.fleet import Fleet
from ddtree_tui.model.intents import Launch
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.backend import StaticFleet
from tests import httpc
from tests.app.screen_text import screen_text, until
from tests.collector.conftest import ServeProc
from tests.util import free_port


async def _frozen_screens(snap: FleetSnapshot, logs: dict[str, list[str]]) -> list[str]:
    """The fleet tab and the log tab of a frozen app showing `snap`."""
    app = DDTreeApp(StaticFleet(snap, logs=logs), live=False)
    out = []
    async with app.run_test(size=(150, 40)) as pilot:
        out.append(await _settled(pilot, app))
        await pilot.press("6")
        out.append(await _settled(pilot, app))
    return out


async def _settled(pilot: object, app: DDTreeApp) -> str:
    """The screen once the footer is drawn and two reads in a row agree (tab underlines animate)."""
    prev = ""
    for _ in range(50):
        await pilot.pause(0.15)  # type: ignore[attr-defined]
        text = screen_text(app)
        if text == prev and "Quit" in text:
            return text
        prev = text
    return prev


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_replay_reproduces_the_recorded_screens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "session.jsonl.gz"
    # the demo profile on ports of this test's own (other suites may run the demo at the same time)
    text = packaged_demo_profile().read_text(encoding="utf-8")
    text = text.replace("31010", str(free_port())).replace("31011", str(free_port()))
    (tmp_path / "demo.toml").write_text(text, encoding="utf-8")
    fleet = Fleet(
        [load_profile(tmp_path / "demo.toml")],
        todos_path=tmp_path / "todos.json",
        history_path=tmp_path / "h.jsonl",
        demo=True,
    )
    rec = RecordingFleet(fleet, Recorder(path, snapshot_every=3600))  # one snapshot; the rest is events
    app = DDTreeApp(rec, demo=True, refresh_hz=10)
    marks: list[FleetSnapshot] = []
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: "● connected" in screen_text(app), 15, "the host to connect")
        await pilot.press("3", "l")  # launch dflash: starting -> ready, log lines, GPU labels
        await until(
            pilot,
            lambda: (s := fleet.snapshot().service("local", "dflash")) and s.state == "starting",
            20,
            "starting",
        )
        marks.append(fleet.snapshot())
        await until(
            pilot,
            lambda: (s := fleet.snapshot().service("local", "dflash")) and s.state == "ready",
            40,
            "ready",
        )
        # a few more GPU samples and probes: until the ready server's accept length has been read (asserted
        # below; it took a fixed 1.5 s before), then half a second more of them
        await until(
            pilot,
            lambda: (s := fleet.snapshot().service("local", "dflash")) and s.accept_length is not None,
            20,
            "the accept length read",
        )
        await pilot.pause(0.5)
        marks.append(fleet.snapshot())
        live_logs = {"local/dflash": fleet.log_lines("local/dflash")}
        await app.shutdown_fleet()  # stops the fleet (kills the demo's service) and closes the recording
    assert live_logs["local/dflash"], "the launch wrote no log lines"
    assert marks[1].service("local", "dflash").accept_length is not None  # type: ignore[union-attr]

    kinds = [r["type"] for r in read_records(path)]
    assert kinds[0] == "header" and kinds[-1] == "end" and kinds.count("event") > 10
    replay = ReplayFleet(path, speed=1.0)
    for mark in marks:
        replay.advance_to(mark.ts)
        got = replay.snapshot().model_copy(update={"ts": mark.ts})
        assert got.model_dump(exclude={"ts"}) == mark.model_dump(exclude={"ts"})
        logs = {"local/dflash": replay.log_lines("local/dflash")}
        if mark is marks[-1]:
            assert logs == live_logs
        a, b = await _frozen_screens(got, logs), await _frozen_screens(mark, logs)
        import difflib

        assert "local/dflash" in b[0] and ("● ready" if mark is marks[-1] else "starting") in b[0]
        assert a == b, "\n".join(
            difflib.unified_diff(
                b[0].splitlines() + b[1].splitlines(), a[0].splitlines() + a[1].splitlines(), lineterm=""
            )
        )
    replay.seek_end()
    assert replay.finished and "finished" in replay.banner()


def _tiny_recording(path: Path) -> None:
    snap = {"schema": 1, "ts": 1000.0, "hosts": [{"name": "ct200", "address": "ct200", "state": "connected"}]}
    lines = [
        {"type": "header", "version": 1, "started": 1000.0, "max_bytes": 1 << 20},
        {"type": "snapshot", "t": 1000.0, "snap": snap},
        *(
            {
                "type": "event",
                "t": 1000.0 + i,
                "ev": {
                    "kind": "gpu",
                    "ts": 1000.0 + i,
                    "host": "ct200",
                    "host_sample": None,
                    "telemetry": {"source": "nvml"},
                    "gpus": [
                        {
                            "index": 0,
                            "name": "NVIDIA H200",
                            "util_gpu": 10 * i,
                            "mem_used_mb": 100,
                            "mem_total_mb": 143771,
                        }
                    ],
                },
            }
            for i in range(1, 9)
        ),
        {"type": "end", "t": 1009.0, "reason": "stopped"},
    ]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")


@pytest.mark.timeout(60)
async def test_replay_plays_in_the_tui_labelled_replay(tmp_path: Path) -> None:
    path = tmp_path / "tiny.jsonl.gz"
    _tiny_recording(path)
    fleet = ReplayFleet(path, speed=4.0)
    app = DDTreeApp(fleet, refresh_hz=10)
    async with app.run_test(size=(140, 36)) as pilot:
        await until(pilot, lambda: "REPLAY of tiny.jsonl.gz" in screen_text(app), 30, "the REPLAY banner")
        await until(
            pilot, lambda: "ct200:0" in screen_text(app) and "80%" in screen_text(app), 30, "the last sample"
        )
        await until(pilot, lambda: "finished" in screen_text(app), 30, "the end of the replay")
        assert fleet.gpu_history("ct200", 0)[-1] == 80.0
        res = await fleet.do(Launch(ref=ServiceRef.parse("ct200/x")))
        assert not res.ok and "REPLAY" in res.message
    await fleet.stop()


def test_bad_recordings_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no recording"):
        ReplayFleet(tmp_path / "missing.gz")
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    with pytest.raises(RecordingError, match="not gzip"):
        ReplayFleet(plain)
    nohead = tmp_path / "nohead.gz"
    with gzip.open(nohead, "wt") as f:
        f.write('{"type": "event"}\n')
    with pytest.raises(RecordingError, match="no header"):
        ReplayFleet(nohead)


def test_recording_is_bounded(tmp_path: Path) -> None:
    r = Recorder(tmp_path / "b.gz", max_bytes=4096)
    import os

    for _ in range(2000):
        r.event({"kind": "notice", "ts": 1.0, "text": os.urandom(64).hex()})
    r.close()
    assert r.full and (tmp_path / "b.gz").stat().st_size < 4096 + 70000  # one compressor block past the limit
    last = list(read_records(tmp_path / "b.gz"))[-1]
    assert last == {"type": "end", "t": last["t"], "reason": "size limit reached"}


def test_replay_and_record_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ddtree_tui.cli import main

    assert main(["--replay", str(tmp_path / "missing.gz")]) == 2
    assert "no recording at" in capsys.readouterr().err
    assert main(["--replay", "a.gz", "--record", "b.gz"]) == 2
    assert "do not go together" in capsys.readouterr().err
    assert main(["--replay", str(tmp_path / "missing.gz"), "--speed", "0"]) == 2


@pytest.mark.timeout(60)
def test_serve_replays_a_recording_for_prometheus(
    tmp_path: Path, serve_demo: Callable[..., ServeProc]
) -> None:
    path = tmp_path / "tiny.jsonl.gz"
    _tiny_recording(path)
    srv = serve_demo("--replay", str(path), "--speed", "100")
    deadline = time.monotonic() + 20
    text = ""
    while time.monotonic() < deadline:
        text = httpc.get(f"{srv.url}/metrics", timeout=5).text
        if 'ddtree_gpu_utilization_ratio{gpu="0",host="ct200"} 0.8' in text:
            break
        time.sleep(0.2)
    assert 'ddtree_gpu_utilization_ratio{gpu="0",host="ct200"} 0.8' in text
    assert httpc.get(f"{srv.url}/snapshot", timeout=5).json()["hosts"][0]["name"] == "ct200"

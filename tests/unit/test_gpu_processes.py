"""GPU processes as nvitop shows them (issue 28): user, CPU %, host memory, elapsed time and the full command,
read from /proc by the sampler's bundled helper, carried on the sampler line, and drawn as rows under their
GPU with a scheduler's workers under the server's main pid."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

from ddtree_tui.model.snapshot import GpuSample
from ddtree_tui.remote.hoststats import ProcInfo
from ddtree_tui.telemetry.frames import FrameBuilder
from ddtree_tui.telemetry.nvsmi import parse_apps
from ddtree_tui.ui.details import process_table
from ddtree_tui.ui.views import process_rows

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
UUID = "GPU-a3d17c95-2dae-bb06-e486-01c3ab05eacd"


def test_proc_info_reads_a_real_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # ddtree-proc-test"])
    try:
        info = ProcInfo()
        first = info.read(child.pid, time.monotonic())
        assert first is not None
        assert "cpu_percent" not in first  # a rate needs two readings
        time.sleep(0.2)
        second = info.read(child.pid, time.monotonic())
        assert second is not None
        assert second["user"] == pwd.getpwuid(os.getuid()).pw_name
        assert second["ppid"] == os.getpid()
        assert "ddtree-proc-test" in second["command"] and second["command"].startswith(sys.executable)
        assert second["host_mem_mb"] >= 1 and second["elapsed_s"] >= 0
        assert 0 <= second["cpu_percent"] <= 100 * (os.cpu_count() or 1)
        info.forget_except(set())
        assert info.prev == {}
    finally:
        child.kill()
        child.wait()
    assert ProcInfo().read(child.pid, time.monotonic()) is None  # gone: nothing, no error


def test_the_sampler_line_carries_proc_facts_into_the_snapshot() -> None:
    line = {
        "v": 1,
        "src": "nvml",
        "gpus": [
            {
                "index": 0,
                "uuid": UUID,
                "processes": [{"pid": 567, "name": "python3", "used_memory_mb": 21482}],
            }
        ],
        "procs": {
            "567": {
                "user": "sglang",
                "cpu_percent": 98.5,
                "host_mem_mb": 5120,
                "elapsed_s": 7325.0,
                "ppid": 1,
                "command": "python3 -m sglang.launch_server --port 30000",
                "junk": 1,
            },
            "568": "not a mapping",
        },
    }
    _, gpus, _ = FrameBuilder().build(line, now=100.0)
    (p,) = gpus[0].processes
    assert (p.user, p.cpu_percent, p.host_mem_mb, p.elapsed_s, p.ppid) == ("sglang", 98.5, 5120, 7325.0, 1)
    assert p.command == "python3 -m sglang.launch_server --port 30000"
    bad = {**line, "procs": {"567": {"user": 5, "cpu_percent": "x", "host_mem_mb": True}}}
    _, gpus, _ = FrameBuilder().build(bad, now=100.0)
    assert (gpus[0].processes[0].user, gpus[0].processes[0].cpu_percent) == (None, None)


def test_rows_from_the_fixture_with_a_scheduler_child_under_its_server() -> None:
    (server,) = parse_apps((FIXTURES / "query-apps-under-load.csv").read_text(), {567: "dflash"})[UUID]
    server = server.model_copy(
        update={
            "user": "sglang",
            "cpu_percent": 98.5,
            "host_mem_mb": 5120,
            "elapsed_s": 7325.0,
            "ppid": 1,
            "command": "python3 -m sglang.launch_server --model-path /models/x --port 30000",
        }
    )
    worker = server.model_copy(
        update={
            "pid": 601,
            "ppid": 567,
            "used_memory_mb": 900,
            "cpu_percent": 12.0,
            "service": None,
            "command": "python3 -c from multiprocessing.spawn import spawn_main",
        }
    )
    stray = worker.model_copy(
        update={
            "pid": 700,
            "ppid": 1,
            "used_memory_mb": 2000,
            "user": None,
            "cpu_percent": None,
            "host_mem_mb": None,
            "elapsed_s": None,
            "command": None,
            "name": "stray",
        }
    )
    g = GpuSample(index=0, uuid=UUID, processes=[worker, stray, server])
    rows = process_rows(g, "local")
    assert [(r.name, r.user, r.cpu, r.service) for r in rows] == [
        (" ├ pid 567", "sglang", "98%", "local/dflash"),
        ("   └ pid 601", "sglang", "12%", "-"),  # the scheduler child, under its server
        (" └ pid 700", "-", "-", "-"),
    ]
    assert (rows[0].mem, rows[0].host_mem, rows[0].elapsed) == ("21.0G", "5.0G", "2h02m")
    assert rows[2].command == "stray"  # no /proc facts: the name nvidia-smi gave
    cols, table = process_table("local", g)
    assert cols[-1] == "Command"
    assert table[0][-1] == "python3 -m sglang.launch_server --model-path /models/x --port 30000"  # whole

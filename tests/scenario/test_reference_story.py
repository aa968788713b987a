"""The acceptance test of the whole tool: the reference deployment replayed end to end through the real code
paths — two hosts behind two real sshd processes, the doctor, launches with a port conflict, smoke
generations, an interleaved seed3 benchmark, a todo list that cannot lie, a GPU falling off the bus on CT129
and its service moved to CT200, and nothing left running at the end.

The story (see docs/walkthrough.md): CT129 loses a GPU after a crash; the engineer moves to CT200, which has a
different CUDA build of torch; DFlash and DDTree (shadow-linear) go up on GPU 1 on ports that don't collide; a
smoke generation; seed3 on both; the todo list tracks it — and in the original it was wrong: a finished item
stayed "in progress".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtree_tui.doctor import render
from tests.scenario.helpers import HANDLE_FAULT, Timer, build_world, kill_strays, play_story
from tests.sshd import SshEnv

pytestmark = [pytest.mark.sshd, pytest.mark.timeout(150)]


def _finding(report, check: str):  # type: ignore[no-untyped-def]
    hits = [f for f in report.findings if f.check == check]
    assert hits, f"no finding {check!r} in:\n{render(report)}"
    return hits[0]


async def test_reference_story(ssh_env: SshEnv, tmp_path: Path) -> None:
    world = build_world(tmp_path, ssh_env)
    try:
        res = await play_story(world, Timer())
    finally:
        kill_strays(world)  # only does something when the story failed half-way

    # doctor: CT200's torch is cu128 beside a cu13 runtime; CT129 (cu130) is consistent
    cuda200 = _finding(res.doctor_ct200, "cuda-runtimes")
    assert cuda200.status == "fail", render(res.doctor_ct200)
    assert ".so.12" in cuda200.evidence and ".so.13" in cuda200.evidence
    assert cuda200.fix and "same CUDA major" in cuda200.fix and "cu13/lib" in cuda200.fix
    torch200 = _finding(res.doctor_ct200, "torch")
    assert "2.8.0+cu128" in torch200.evidence and "CUDA build 12.8" in torch200.evidence
    assert "CUDA build 13.0" in _finding(res.doctor_ct129, "torch").evidence
    assert _finding(res.doctor_ct129, "cuda-runtimes").status == "ok", render(res.doctor_ct129)
    assert _finding(res.doctor_ct200, "cuda-driver").evidence.endswith("driver supports CUDA 13.0")

    # the held port was refused, naming the holder, with the next free one suggested and then used
    held = world.ports["held"]
    assert f"port {held} on ct200 is already in use by pid" in res.refused.message
    assert res.new_port != held and str(world.hosts["ct200"].profile_path) in res.refused.suggestion
    assert f"port {res.new_port}" in res.launches["ct200/dflash"].message

    # both ready, a smoke generation through each (HTTP through the ssh port forward)
    for ref, out in res.smokes.items():
        assert out["text"] and out["meta_info"]["completion_tokens"] == 16, (ref, out)

    # seed3, interleaved over both services, deltas vs DFlash
    run = res.bench
    assert run.status == "complete" and run.prompt_set == "seed3" and run.baseline == "ct200/dflash"
    assert len(run.rows) == 6 and all(r.failed == 0 and r.n == 1 for r in run.rows)
    assert [o.split()[0] for o in run.order[:4]] == ["ct200/dflash", "ct200/ddtree-shadow"] * 2
    dd = [r for r in run.rows if r.service == "ct200/ddtree-shadow"]
    assert all(r.mode == "shadow-linear" and r.delta_tok_s_pct is not None for r in dd)
    assert "base" in res.bench_table and "%" in res.bench_table and "SIMULATED" in res.bench_table

    # todos: the two with evidence completed themselves (and on disk); the in-progress lie is flagged
    assert res.todo_status == ["completed", "completed", "in_progress"]
    assert [e.state for e in res.todo_evidence] == ["verified", "verified", "verified"]
    assert res.todo_evidence[2].mismatch == "evidence holds but still in_progress"
    assert [t["status"] for t in res.todos_on_disk] == res.todo_status

    # CT129: GPU 1 shows the driver's error, the service crashed, and moved to CT200 with the same spec
    assert res.fault_gpu.fault == HANDLE_FAULT
    assert "signal 9" in (res.crashed.detail or "")
    assert res.move.ok, res.move
    assert "moved dflash-prod from ct129 to ct200" in res.move.message
    assert res.moved is not None and res.moved.state == "ready"
    assert res.moved.port == world.ports["ct129/dflash-prod"] and res.moved.gpus == [1]

    # the end: every kill succeeded and no process of ours remains
    for ref, k in res.kills.items():
        assert k.ok, (ref, k)
    assert res.leftover_sims == [] and res.leftover_procs == []

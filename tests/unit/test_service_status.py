"""services.status.derive_status, one row a rule: the facts a manager has, and the state (and detail) they make."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ddtree_tui.config import ServiceSpec
from ddtree_tui.services.argcheck import from_answer
from ddtree_tui.services.health import HealthResult, ServerInfo
from ddtree_tui.services.logs import LogMetrics
from ddtree_tui.services.replies import (
    ArgcheckReply,
    BadReply,
    KillReply,
    LaunchReply,
    WatchLine,
    WatchRecord,
    parse_reply,
)
from ddtree_tui.services.status import Facts, derive_status, initial_status

NOW = 1_800_000_000.0
SPEC = ServiceSpec(name="a", port=30000, startup_timeout=600, model="/models/m", draft_model="/models/d")
EXT = ServiceSpec(name="e", port=30001, launcher="external")


def _alive(**kw: Any) -> WatchRecord:
    return WatchRecord(present=True, alive=True, pid=4242, pgid=4242, started_at=NOW - 30, port=30000, **kw)


def _dead(**kw: Any) -> WatchRecord:
    return WatchRecord(present=True, alive=False, pid=4242, started_at=NOW - 30, **kw)


OK = HealthResult(ok=True, latency_ms=3.456, ts=NOW)
DOWN = HealthResult(ok=False, error="connection refused", ts=NOW)
BUSY = HealthResult(ok=False, status_code=503, error="HTTP 503", ts=NOW)

ROWS: list[tuple[str, ServiceSpec, Facts, str, str | None]] = [
    # id, spec, facts, state, a substring of detail (None: detail is None)
    ("not-seen-yet", SPEC, Facts(), "unknown", None),
    ("no-pidfile", SPEC, Facts(proc=WatchRecord(present=False)), "stopped", None),
    ("untrusted-workdir", SPEC, Facts(proc=WatchRecord(untrusted="owned by uid 0")), "unknown", "not trusted"),
    ("host-unreachable", SPEC, Facts(proc=_alive(), health=OK, unreachable="ssh: timed out"), "unknown",
     "host unreachable: ssh: timed out"),
    ("starting-shows-log-line", SPEC, Facts(proc=_alive(), last_line="Loading weights 40%"), "starting",
     "Loading weights 40%"),
    ("starting-probe-refused", SPEC, Facts(proc=_alive(), health=DOWN, fail_count=1), "starting", None),
    ("ready", SPEC, Facts(proc=_alive(), health=OK), "ready", None),
    ("ready-on-old-port", SPEC, Facts(proc=_alive().model_copy(update={"port": 30005}), health=OK), "ready",
     "running on port 30005; the profile says 30000"),
    ("one-failed-probe-keeps-ready", SPEC, Facts(proc=_alive(), health=DOWN, ever_ready_pid=4242, fail_count=1),
     "ready", None),
    ("unhealthy-after-ready", SPEC,
     Facts(proc=_alive(), health=DOWN, ever_ready_pid=4242, fail_count=2, fail_since=NOW - 5), "unhealthy",
     "connection refused (since"),
    ("not-ready-after-startup-timeout", SPEC.model_copy(update={"startup_timeout": 10}),
     Facts(proc=_alive(), health=DOWN), "unhealthy", "not ready after 10 s: connection refused"),
    ("crashed-exit-code", SPEC, Facts(proc=_dead(why="dead", exit={"exit_code": 1})), "crashed",
     "exited with status 1"),
    ("crashed-signal", SPEC, Facts(proc=_dead(why="dead", exit={"exit_code": None, "signal": 9})), "crashed",
     "killed by signal 9"),
    ("could-not-start", SPEC, Facts(proc=_dead(why="dead", exit={"error": "No such file: python9"})), "crashed",
     "could not start: No such file: python9"),
    ("stale-pidfile-no-exit-file", SPEC, Facts(proc=_dead(why="dead")), "crashed", "exit status unknown"),
    ("pid-now-foreign", SPEC, Facts(proc=_dead(why="foreign", other_cmd="vim notes.txt")), "crashed",
     "pid 4242 now belongs to another process (vim notes.txt)"),
    ("pid-reused", SPEC, Facts(proc=_dead(why="pid-reused", other_cmd="sleep 99")), "crashed",
     "now belongs to another process (sleep 99)"),
    ("degraded-orphans-on-gpu", SPEC,
     Facts(proc=_dead(why="dead", exit={"exit_code": 137}, orphans=[51, 52], orphan_gpu=[[1, 1024], [1, 2048]])),
     "crashed", "degraded: main pid 4242 exited with status 137, 2 processes still alive (pids 51, 52), "
     "3072 MiB on GPU 1"),
    ("log-says-oom", SPEC,
     Facts(proc=_dead(why="dead", exit={"exit_code": 1}, tail=["torch.OutOfMemoryError: CUDA out of memory"])),
     "crashed", "exited with status 1"),
    ("killed-by-us-stopping-file", SPEC, Facts(proc=_dead(why="dead", stopping=True)), "stopped", "stopping"),
    ("killed-by-us-in-progress", SPEC, Facts(proc=_dead(why="dead"), killing=True), "stopped", "stopping"),
    ("external-not-probed", EXT, Facts(), "unknown", "external: not probed yet"),
    ("external-ready", EXT, Facts(health=OK), "ready", "external"),
    ("external-loading-503", EXT, Facts(health=BUSY), "starting", "external: HTTP 503"),
    ("external-503-after-ready", EXT, Facts(health=BUSY, ever_ready_pid=-1), "unhealthy", "external: HTTP 503"),
    ("external-not-answering", EXT, Facts(health=DOWN), "unhealthy", "not answering (connection refused)"),
]  # fmt: skip


PREVIOUS_STATE = {"one-failed-probe-keeps-ready": "ready"}  # rows that start from another state than unknown


@pytest.mark.parametrize(("row", "spec", "facts", "state", "detail"), ROWS, ids=[r[0] for r in ROWS])
def test_derive_status(row: str, spec: ServiceSpec, facts: Facts, state: str, detail: str | None) -> None:
    prev = initial_status(spec, "h", NOW - 100).model_copy(
        update={"state": PREVIOUS_STATE.get(row, "unknown")}
    )
    st = derive_status(spec, facts, prev, NOW)
    assert st.state == state
    if detail is None:
        assert st.detail is None
    else:
        assert st.detail is not None and detail in st.detail
    if state == prev.state:
        assert st.since == prev.since
    elif not (state == "unhealthy" and facts.fail_since):
        assert st.since == NOW


def test_a_change_of_state_moves_since_and_no_change_keeps_it() -> None:
    prev = initial_status(SPEC, "h", NOW - 100)
    ready = derive_status(SPEC, Facts(proc=_alive(), health=OK), prev, NOW)
    assert ready.since == NOW and ready.pid == 4242 and ready.health_latency_ms == 3.46
    again = derive_status(SPEC, Facts(proc=_alive(), health=OK), ready, NOW + 2)
    assert again == ready


def test_unhealthy_counts_from_the_first_failed_probe() -> None:
    prev = initial_status(SPEC, "h", NOW - 100)
    facts = Facts(proc=_alive(), health=DOWN, ever_ready_pid=4242, fail_count=3, fail_since=NOW - 7)
    assert derive_status(SPEC, facts, prev, NOW).since == NOW - 7


def test_crash_keeps_the_redacted_log_tail_and_drops_the_latency() -> None:
    prev = initial_status(SPEC, "h", NOW).model_copy(update={"health_latency_ms": 4.0, "state": "ready"})
    rec = _dead(why="dead", exit={"exit_code": 1}, tail=["--api-key sk-secret", "CUDA out of memory"])
    st = derive_status(SPEC, Facts(proc=rec, redact=lambda s: s.replace("sk-secret", "***")), prev, NOW)
    assert st.last_log == ["--api-key ***", "CUDA out of memory"]
    assert st.health_latency_ms is None and st.pid == 4242


def test_stopped_clears_the_speed_numbers() -> None:
    prev = initial_status(SPEC, "h", NOW).model_copy(update={"accept_length": 3.2, "running_reqs": 4})
    st = derive_status(SPEC, Facts(proc=WatchRecord(present=False)), prev, NOW)
    assert st.accept_length is None and st.running_reqs is None and st.pid is None


def test_the_log_wins_over_server_info() -> None:
    info = ServerInfo(version="0.5.1", model_path="/m", avg_spec_accept_length=2.0, last_gen_throughput=50.0)
    m = LogMetrics(kind="decode", accept_len=3.5)
    prev = initial_status(SPEC, "h", NOW)
    st = derive_status(SPEC, Facts(proc=_alive(), health=OK, info=info, metrics=m), prev, NOW)
    assert st.version == "0.5.1" and st.model == "/m"
    assert st.accept_length is None  # the log has it: the log line's own update sets it, not /server_info
    assert st.gen_throughput == 50.0


def test_watch_records_are_lax_about_pidfile_values_but_a_wrong_reply_is_a_clear_error() -> None:
    rec = WatchRecord.model_validate({"present": True, "pid": "12", "pids": [1, "x", 2], "exit": "?"})
    assert rec.pid is None and rec.pids == [1, 2] and rec.exit is None
    line = parse_reply(WatchLine, {"ts": time.time(), "services": {"a": {"present": False}}}, "watch")
    assert line.services["a"].present is False
    with pytest.raises(BadReply, match=r"watch sent a reply of the wrong shape \(services.a"):
        parse_reply(WatchLine, {"services": {"a": 3}}, "watch")
    with pytest.raises(BadReply, match="kill"):
        parse_reply(KillReply, {"ok": True}, "kill")
    r = parse_reply(
        LaunchReply, {"ok": False, "reason": "port", "holder": {"pid": None, "cmd": None}}, "launch"
    )
    assert r.holder is not None and r.holder.pid is None


def test_an_argcheck_reply_becomes_a_verdict_and_a_malformed_one_a_clear_error() -> None:
    ok = from_answer(
        parse_reply(ArgcheckReply, {"argcheck": 1, "parser": True, "version": "0.5.1"}, "argcheck")
    )
    assert ok.ok is True and ok.version == "0.5.1"
    no = from_answer(
        parse_reply(ArgcheckReply, {"argcheck": 1, "parser": False, "import_error": "no torch"}, "a")
    )
    assert no.ok is None and no.note is not None and "no torch" in no.note
    with pytest.raises(BadReply, match="algorithms"):
        parse_reply(ArgcheckReply, {"argcheck": 1, "parser": True, "algorithms": 5}, "argcheck")


def test_a_figure_a_slower_source_reads_after_the_log_keeps_the_time_the_log_saw_it() -> None:
    """The cause of test_freshness's rare failure: /server_info and /metrics are read every fifth probe, the
    log line as it is written. The last decode's figure (1117.85) reached the log between two reads; the next
    read came only after six idle minutes and saw the figure "change" from the one before the decode
    (1156.45), so it was stamped now and the idle server's last throughput looked fresh. A figure the status
    already shows from another source keeps the time that source saw it."""
    from ddtree_tui.model.snapshot import is_stale
    from ddtree_tui.services.sglang_metrics import SglangGauges
    from ddtree_tui.services.status import gauge_figures, info_figures, observed_times

    t_read, t_log = NOW - 400, NOW - 399.5  # the last reads, then the last decode line
    info_before = ServerInfo(last_gen_throughput=1156.45, avg_spec_accept_length=2.8)
    sg_before = SglangGauges(running_reqs=1, queue_reqs=0, gen_throughput=1156.452, accept_length=2.8)
    info_seen = observed_times({}, {}, info_figures(info_before), t_read)
    sglang_seen = observed_times({}, {}, gauge_figures(sg_before), t_read)
    m = LogMetrics(kind="decode", gen_throughput=1117.85, running_req=0, queue_req=0, accept_len=2.8)
    shown = initial_status(SPEC, "h", t_read).model_copy(
        update={"state": "ready", "gen_throughput": 1117.85, "accept_length": 2.8, "running_reqs": 0,
                "queue_reqs": 0, "observed_at": {"gen_throughput": t_log, "accept_length": t_log,
                                                 "running_reqs": t_log, "queue_reqs": t_log}}
    )  # fmt: skip
    # six minutes on; /server_info's accept length is the server's whole-life average, another figure
    info = ServerInfo(last_gen_throughput=1117.85, avg_spec_accept_length=2.8777)
    sg = SglangGauges(running_reqs=0, queue_reqs=0, gen_throughput=1117.847, accept_length=2.8)
    # the figure changed since this source's last read, but not since the log reported it
    assert (
        observed_times(info_seen, info_figures(info_before), info_figures(info), NOW)["gen_throughput"] == NOW
    )
    info_seen = observed_times(info_seen, info_figures(info_before), info_figures(info), NOW, shown)
    sglang_seen = observed_times(sglang_seen, gauge_figures(sg_before), gauge_figures(sg), NOW, shown)
    assert info_seen["gen_throughput"] == sglang_seen["gen_throughput"] == t_log
    assert info_seen["accept_length"] == NOW  # the lifetime average did change: it is a new observation
    assert sglang_seen["running_reqs"] == NOW  # a count is observed when it is read
    facts = Facts(proc=_alive(), health=OK, metrics=m, metrics_at=t_log, info=info, info_seen=info_seen,
                  sglang=sg, sglang_seen=sglang_seen)  # fmt: skip
    st = derive_status(SPEC, facts, shown, NOW)
    assert st.observed_at["gen_throughput"] == t_log and is_stale(st.observed_at["gen_throughput"], NOW)
    # ...but not the figure shown: the last window's, from the log and /metrics, as old as the decode
    assert (st.accept_length, st.observed_at["accept_length"]) == (2.8, t_log)
    # a server with neither the log's nor /metrics' figure: its lifetime average is all there is
    alone = derive_status(SPEC, Facts(proc=_alive(), health=OK, info=info, info_seen=info_seen), shown, NOW)
    assert (alone.accept_length, alone.observed_at["accept_length"]) == (2.8777, NOW)
    # a figure that did change since the status showed it is a new observation
    moved = observed_times(sglang_seen, gauge_figures(sg), gauge_figures(sg.model_copy(
        update={"gen_throughput": 1200.0})), NOW + 1, st)  # fmt: skip
    assert moved["gen_throughput"] == NOW + 1


def test_every_live_value_says_when_it_was_observed_and_a_fresh_read_beats_a_stale_log_line() -> None:
    """Issue 29: after a bench the last decode line said 69.2 tok/s and 1 running; minutes later /metrics
    says 0 running (a count read now is observed now), and its throughput gauge still holds the last figure
    (observed when it last changed, so it ages instead of looking fresh)."""
    from ddtree_tui.services.sglang_metrics import SglangGauges
    from ddtree_tui.services.status import gauge_figures, observed_times

    t_log = NOW - 360
    m = LogMetrics(kind="decode", gen_throughput=69.2, running_req=1, queue_req=0, accept_len=3.4)
    logged = {"gen_throughput": t_log, "running_reqs": t_log, "queue_reqs": t_log, "accept_length": t_log}
    prev = initial_status(SPEC, "h", t_log).model_copy(
        update={"state": "ready", "gen_throughput": 69.2, "running_reqs": 1, "queue_reqs": 0,
                "accept_length": 3.4, "observed_at": logged}
    )  # fmt: skip
    gauges = SglangGauges(running_reqs=0, queue_reqs=0, gen_throughput=69.213, accept_length=3.4)
    first = observed_times({}, {}, gauge_figures(gauges), t_log + 5)  # the first read after the decode line
    assert first == dict.fromkeys(
        ("running_reqs", "queue_reqs", "gen_throughput", "accept_length"), t_log + 5
    )
    later = observed_times(first, gauge_figures(gauges), gauge_figures(gauges), NOW)  # six minutes on
    assert later["running_reqs"] == later["queue_reqs"] == NOW  # counts: read now, observed now
    assert later["gen_throughput"] == later["accept_length"] == t_log + 5  # kept figures: as old as before
    moved = gauges.model_copy(update={"gen_throughput": 70.0})
    assert (
        observed_times(later, gauge_figures(gauges), gauge_figures(moved), NOW + 1)["gen_throughput"]
        == NOW + 1
    )

    facts = Facts(proc=_alive(), health=OK, metrics=m, metrics_at=t_log, sglang=gauges, sglang_seen=later)
    st = derive_status(SPEC, facts, prev, NOW)
    assert (st.running_reqs, st.observed_at["running_reqs"]) == (0, NOW)  # not the log line's stale 1
    assert (st.gen_throughput, st.observed_at["gen_throughput"]) == (69.213, t_log + 5)
    assert st.observed_at["health_latency_ms"] == OK.ts
    # a log line as fresh as the read wins (the log reports each decode window)
    newer = Facts(proc=_alive(), health=OK, metrics=m, metrics_at=NOW, sglang=gauges, sglang_seen=later)
    st3 = derive_status(SPEC, newer, prev, NOW)
    assert st3.running_reqs == 1 and st3.observed_at["running_reqs"] == t_log  # as the log line set it
    # stopped: nothing live is left, nor its timestamps
    gone = derive_status(SPEC, Facts(proc=WatchRecord(present=False)), st, NOW + 2)
    assert gone.state == "stopped" and gone.observed_at == {} and gone.gen_throughput is None

"""The fault table of issue 20: every attack and fault probe, what must happen, and what did.

Each probe is a real test (real sshd on 127.0.0.1, real processes, own device nodes and FIFOs, never the
machine's /dev/null); this runs them all in one pytest session and prints one row each. Run:

    .venv/bin/python benchmarks/faults.py [--only WORD]

Exit status 0 when every probe held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
A = "tests/integration/test_attacks_local.py::"
S = "tests/integration/test_attacks_ssh.py::"
F = "tests/integration/test_special_files.py::"
M = "tests/integration/test_small_faults.py::"

# (item, probe, expected, test node)
PROBES: list[tuple[str, str, str, str]] = [
    (
        "1",
        "workdir made by another user (0777, modules planted), local",
        "refused, nothing runs, how to fix",
        A + "test_workdir_owned_by_another_user_is_refused_and_nothing_runs",
    ),
    (
        "1",
        "the same workdir attack through the real sshd",
        "refused, planted code never runs",
        S + "test_ssh_planted_workdir_refused_nothing_runs",
    ),
    (
        "1",
        "group/other-writable workdir of our own",
        "refused: chmod 700",
        A + "test_group_writable_workdir_is_refused",
    ),
    (
        "1",
        "modules planted in our own workdir (cwd of wrapper and service)",
        "never imported (-I, PYTHONSAFEPATH)",
        A + "test_new_workdir_is_created_0700_and_modules_in_it_are_never_imported",
    ),
    (
        "1",
        "doctor on a workdir another user controls",
        "FAIL naming the owner, nothing runs",
        M + "test_doctor_fails_a_workdir_another_user_controls",
    ),
    (
        "1",
        "pidfile forged from /proc (real start time + argv hash), local",
        "nothing signalled",
        A + "test_pidfile_forged_from_proc_never_gets_a_process_signalled",
    ),
    (
        "1",
        "forged pidfile through the real sshd",
        "nothing signalled",
        S + "test_ssh_forged_pidfile_never_signals",
    ),
    (
        "2",
        "remote workdir '~/ddt-wd', 'ddt-wd', './x'",
        "profile error file:line, no '~' folder",
        A + "test_remote_workdir_must_be_absolute",
    ),
    (
        "2",
        "relative workdir reaching the host program",
        "refused, nothing created",
        A + "test_host_program_refuses_a_relative_workdir",
    ),
    (
        "3",
        "4 launches of one service at once, local",
        "one spawns, others 'already running'",
        A + "test_concurrent_launches_spawn_one_service",
    ),
    (
        "3+4",
        "3 launches over ssh, then SIGKILL of main (workers live)",
        "one spawn; degraded; kill ends group",
        S + "test_ssh_concurrent_launches_and_orphaned_group",
    ),
    (
        "4",
        "main pid SIGKILLed, its worker keeps running",
        "'degraded: ... 1 process still alive'; kill ends it",
        A + "test_workers_outliving_their_main_pid_show_degraded_and_kill_ends_them",
    ),
    (
        "5",
        "WANDB_KEY, PRIVATE_KEY, AWS_ACCESS_KEY_ID, --api-key, --hf-token=",
        "masked in dry-run, launch, pidfile, ps of wrapper, log lines, last_log, status --json, logs",
        A + "test_secrets_never_leave_through_any_channel",
    ),
    (
        "6",
        "sshd killed for 3 s in the middle of a 15-request remote bench",
        "waits, reconnects, <=1 failed; errors name URL and port",
        "tests/integration/test_bench_remote.py::test_ssh_drop_during_a_remote_bench_waits_for_the_reconnect",
    ),
    (
        "7",
        "SIGHUP during --run-bench --demo",
        "exit 130, JSON saved, simulators stopped",
        F + "test_sighup_during_run_bench_saves_and_stops_the_demo_servers",
    ),
    (
        "7",
        "todo file: a device, a directory, an endless device",
        "written / clear error, nothing replaced",
        F + "test_todo_file_on_a_device_a_directory_and_a_full_disk",
    ),
    (
        "7",
        "todo save that cannot write (file size limit ~ full disk)",
        "clear error, old file whole, no tmp",
        F + "test_todo_save_that_cannot_write_is_a_clear_error_and_loses_nothing",
    ),
    (
        "7",
        "status --json into a closed pipe",
        "no traceback, exit 141",
        M + "test_status_into_a_closed_pipe_has_no_traceback",
    ),
    (
        "7",
        "status with an unreachable host",
        "exit 1 (0 when all connected)",
        M + "test_status_exit_code_says_a_host_is_unreachable",
    ),
    (
        "7",
        'profile types: port = "32110", keepalive_count_max = true, trust_remote_code = "no"',
        "error naming file:line:field",
        "tests/unit/test_config.py::test_strict_types_are_not_coerced",
    ),
    (
        "7",
        "logs -f while sshd is killed and restarted",
        "goes on after the reconnect",
        M + "test_logs_follow_goes_on_after_the_connection_drops",
    ),
    (
        "7",
        "--max-new-tokens 99999999",
        "one line naming the option, no pydantic URL",
        M + "test_out_of_range_bench_option_is_one_clear_line",
    ),
    (
        "7",
        "launch that cannot write its pidfile (file size limit ~ full disk)",
        "reason named, service not left running, no *.tmp*",
        M + "test_launch_that_cannot_write_its_pidfile_says_why_and_leaves_nothing",
    ),
    (
        "7",
        "doctor: GPU 1 reports [GPU is lost]",
        "FAIL for the service on GPU 1, WARN otherwise",
        M + "test_doctor_gpu_fallen_off_the_bus_is_a_fail_for_its_service",
    ),
    (
        "7",
        "newline in extra_args",
        "no forged '[ddtree-tui] ...' log line",
        A + "test_newline_in_extra_args_cannot_forge_a_log_line",
    ),
    (
        "7",
        "corrupt todo file without a .bak",
        "message names no .bak that does not exist",
        F + "test_corrupt_todo_message_names_a_backup_only_when_there_is_one",
    ),
    (
        "8",
        "sampler's first line stale (nvidia-smi slow, no NVML), status --timeout 20",
        "waits for GPU rows; a timeout says so in the note",
        "tests/integration/test_telemetry_ssh.py::"
        "test_status_waits_for_gpu_rows_when_the_first_line_is_stale",
    ),
    (
        "9",
        "host programs: pidfile and patched file that are device nodes",
        "written, never replaced",
        F + "test_host_programs_write_pidfiles_and_patches_through_the_same_writer",
    ),
    (
        "9",
        "write_file on a char device, FIFO, directory, symlink",
        "device/FIFO kept, directory refused",
        F + "test_write_file_keeps_devices_fifos_and_refuses_directories",
    ),
    (
        "9",
        "--run-bench --json DEV --csv FIFO --history DEV; --json DIR, --csv full device",
        "still a device/FIFO; clear errors",
        F + "test_bench_json_csv_history_into_devices_and_fifos",
    ),
]


def collector_probes() -> list[tuple[str, str, str, str]]:
    """Issue 25: who may talk to `web` and `serve`, and what a client or a file can make them hold."""
    c = "tests/collector/test_serve_security.py::"
    return [
        (
            "25",
            "WebSocket handshake to `web` from Origin http://evil.example, null",
            "403, no process started; own origin still gets a TUI",
            c + "test_web_refuses_a_cross_origin_websocket_and_starts_nothing",
        ),
        (
            "25",
            "Host evil.example on /snapshot /logs /metrics /alerts /events",
            "403, logged (no token); own names and port 200",
            c + "test_serve_refuses_a_rebinding_host_and_a_foreign_origin",
        ),
        (
            "25",
            "40 half-sent requests, --max-connections 20 --header-timeout 2",
            "surplus answered 503, rest closed; serves on",
            c + "test_serve_drops_half_sent_requests_and_caps_connections",
        ),
        (
            "25",
            "intent body nested 50 000 deep; a 2 MB body",
            "400 naming the depth; 413",
            c + "test_a_deep_or_huge_intent_body_is_a_clear_4xx",
        ),
        (
            "25",
            "gzip bomb recordings to serve --replay and --replay",
            "refused with a clear error, never read whole",
            c + "test_a_gzip_bomb_recording_is_refused",
        ),
        (
            "25",
            "SIGHUP to a real `serve --demo`",
            "exit 0, none of its children left",
            c + "test_serve_stops_cleanly_on_sighup",
        ),
    ]


PROBES.extend(collector_probes())


def _issue25_client_probes() -> list[tuple[str, str, str, str]]:
    """Issue 25, the bench client and the counts a user gives (item "25c")."""
    r = "tests/integration/test_read_limits.py::"
    b = "tests/integration/test_bench_bounds_cli.py::"
    return [
        ("25c", "server sends one SSE line that never ends", "that request fails at 16 MiB; next works",
         r + "test_an_endless_line_fails_that_request_at_the_default_limit_and_the_next_one_works"),
        ("25c", "server sends endless headers; an endless body", "fails naming the limit crossed",
         r + "test_endless_headers_and_an_endless_body_fail_with_the_limit_they_crossed"),
        ("25c", "HTTP 500 whose body never ends", "fails with its first words; read stops at 64 KiB",
         r + "test_an_endless_error_body_is_cut_at_64_kib_and_the_request_fails_with_its_start"),
        ("25c", "/server_info body of 100 GB", "not read whole (4 MiB cap)",
         r + "test_a_huge_server_info_is_not_read_whole"),
        ("25c", "prompt file of 100001 prompts", "usage error naming file:line",
         b + "test_a_prompt_file_past_the_bound_is_refused_naming_the_line"),
        ("25c", "2000 prompts × --repeats 1000 (2 M requests)", "usage error before any plan is made",
         b + "test_a_run_past_a_million_requests_is_refused_before_it_plans_them"),
        ("25c", "a prompt's max_new_tokens = 2^64", "usage error naming file:line and field",
         b + "test_a_max_new_tokens_past_2_to_the_64_names_file_line_and_field"),
        ("25c", "--sessions 100000, --turns 100000, bad --max-*-bytes", "usage error (2), no traceback",
         b + "test_counts_past_their_bounds_are_usage_errors"),
        ("25c", "--json under a path that cannot be written", "exit 1 and a clear message",
         b + "test_an_unwritable_json_exits_1_and_says_so"),
        ("25c", "SIGINT mid-run of 5000 prompts", "partial JSON streamed; report reads it",
         b + "test_a_run_stopped_by_sigint_leaves_a_partial_json_that_report_reads"),
        ("25c", "prompt ids '$_$', 'p$\\frac$', '$$' in --html", "drawn as they are, no crash",
         b + "test_a_dollar_in_a_prompt_id_is_drawn_as_it_is_in_the_html"),
    ]  # fmt: skip


PROBES.extend(_issue25_client_probes())


def _results(xml_path: Path) -> dict[str, tuple[str, float]]:
    out: dict[str, tuple[str, float]] = {}
    if not xml_path.exists():
        return out
    for case in ET.parse(xml_path).iter("testcase"):
        name = case.get("name", "")
        t = float(case.get("time", "0") or 0)
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            msg = (bad.get("message") or bad.text or "failed").strip().splitlines()[0][:70]
            res = f"FAILED: {msg}"
        elif skipped is not None:
            res = "SKIPPED"
        else:
            res = "held"
        prev = out.get(name.split("[")[0])
        if prev is None or prev[0] == "held":  # a parametrized probe holds only when every case does
            out[name.split("[")[0]] = (res, t + (prev[1] if prev else 0.0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="run only probes whose text contains this word")
    a = ap.parse_args()
    probes = [p for p in PROBES if not a.only or a.only.lower() in " ".join(p).lower()]
    with tempfile.TemporaryDirectory() as d:
        xml = Path(d) / "faults.xml"
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
               *sorted({p[3] for p in probes})]  # fmt: skip
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall = time.monotonic() - t0
        res = _results(xml)
    rows = [
        (item, probe, exp, *res.get(node.rsplit("::", 1)[1], ("NOT RUN", 0.0)))
        for item, probe, exp, node in probes
    ]
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    w = [max(w[0], 4), min(max(w[1], 5), 70), min(max(w[2], 8), 60)]
    print(f"{'item':<{w[0]}}  {'probe':<{w[1]}}  {'expected':<{w[2]}}  result")
    print(f"{'-' * w[0]}  {'-' * w[1]}  {'-' * w[2]}  ------")
    for item, probe, exp, r, t in rows:
        pl = [probe[i : i + w[1]] for i in range(0, len(probe), w[1])] or [""]
        el = [exp[i : i + w[2]] for i in range(0, len(exp), w[2])] or [""]
        for k in range(max(len(pl), len(el))):
            first = k == 0
            print(
                f"{item if first else '':<{w[0]}}  {pl[k] if k < len(pl) else '':<{w[1]}}  "
                f"{el[k] if k < len(el) else '':<{w[2]}}  {(f'{r} ({t:.1f} s)') if first else ''}"
            )
    held = sum(1 for r in rows if r[3] == "held")
    print(f"\n{held}/{len(rows)} probes held ({wall:.0f} s)")
    return 0 if held == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())

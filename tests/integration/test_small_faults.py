"""Issue 20 item 7, the smaller holes: a closed pipe, unreachable hosts in `status`, raw option errors, a
launch that cannot write its pidfile (a full disk), `logs -f` across a dropped connection, a GPU that fell
off the bus in `doctor`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_tui.cli import main
from ddtree_tui.services import hostscripts
from ddtree_tui.services.launchline import build_launch, service_paths
from tests.fixtures.services.support import cleanup_workdir, processes_running, profile_toml, service_toml
from tests.integration.test_doctor_local import FakeHost, doctor, find, render, svc
from tests.sshd import SshdServer, SshEnv
from tests.util import cli_argv, free_port

pytestmark = pytest.mark.timeout(90)


def _local_profile(tmp_path: Path) -> Path:
    p = tmp_path / "p.toml"
    p.write_text(
        f'name = "here"\naddress = "local"\nworkdir = "{tmp_path / "w"}"\n[telemetry]\nsource = "none"\n'
    )
    return p


@pytest.mark.slow
def test_status_into_a_closed_pipe_has_no_traceback(tmp_path: Path) -> None:
    """`status --json | head -c 10`: the reader is gone before we write; no BrokenPipeError traceback."""
    argv = cli_argv("status", "--json", "--profile", str(_local_profile(tmp_path)))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nobody reads: the first write gets EPIPE
    err = proc.stderr.read().decode()
    rc = proc.wait(60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert rc == 141


def test_status_exit_code_says_a_host_is_unreachable(
    ssh_env: SshEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    down = ssh_env.add_server("downhost")
    down.stop()
    pf = tmp_path / "down.toml"
    pf.write_text(ssh_env.profile_toml("downhost", extra="connect_timeout = 1\n"))
    assert main(["status", "--json", "--profile", str(pf), "--timeout", "3"]) == 1
    host = json.loads(capsys.readouterr().out)["hosts"][0]
    assert host["state"] != "connected"
    assert main(["status", "--profile", str(_local_profile(tmp_path)), "--timeout", "5"]) == 0


def test_out_of_range_bench_option_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--run-bench", "--demo", "--max-new-tokens", "99999999"]) == 2
    err = capsys.readouterr().err
    # one line naming the option, the value and the bound (bench/bounds.py words it since issue 25)
    assert "--max-new-tokens 99999999: must be a whole number 1…1000000" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert "errors.pydantic.dev" not in err and "validation error" not in err


def _limit_file_size() -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # room for the exit file that names the pidfile's path (longer under an xdist worker's temp dir: 200 was
    # too little there), none for the pidfile record (argv, log path, hash: well over 400 bytes)
    resource.setrlimit(resource.RLIMIT_FSIZE, (320, 320))


def test_launch_that_cannot_write_its_pidfile_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    """A full disk (here: a small file size limit on the host program): the service is not left running
    untracked, the reason is named, and no `*.tmp*` file stays behind."""
    wd = tmp_path / "work"
    prof_text = profile_toml("loc", "local", wd, service_toml("a", free_port()))
    from ddtree_tui.config import parse_profile

    prof = parse_profile(prof_text)
    spec = prof.services[0]
    cmd = build_launch(prof, spec)
    p = service_paths(prof, "a")
    cfg = {"workdir": p["workdir"], "argv": cmd.argv, "display_argv": cmd.display_argv(), "accept": [cmd.argv_hash()],
           "env": cmd.env, "cwd": cmd.cwd, "log": cmd.log_path, "pidfile": cmd.pidfile_path,
           "exitfile": cmd.exitfile_path, "stopping": p["stopping"], "lockfile": p["lockfile"], "port": spec.port,
           "bind": spec.bind, "name": "a", "wrapper": hostscripts.WRAPPER, "avoid_ports": []}  # fmt: skip
    try:
        res = subprocess.run([sys.executable, "-I", "-c", hostscripts.LAUNCH], input=json.dumps(cfg), text=True,
                             capture_output=True, timeout=60, preexec_fn=_limit_file_size)  # fmt: skip
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert not out["ok"] and out["reason"] == "exec", out
        assert "cannot write the pidfile" in out["exit"]["error"] and "File too large" in out["exit"]["error"]
        leftovers = [x.name for x in (wd / "run").iterdir() if ".tmp" in x.name]
        assert leftovers == []
        time.sleep(0.3)
        assert not processes_running(cmd.argv), "the service runs on untracked"
    finally:
        cleanup_workdir(wd)


def test_logs_follow_goes_on_after_the_connection_drops(
    ssh_env: SshEnv, sshd: SshdServer, tmp_path: Path
) -> None:
    wd = ssh_env.root / "work-testhost"
    (wd / "logs").mkdir(parents=True)
    log = wd / "logs" / "a.log"
    log.write_text("zero\n")
    pf = tmp_path / "t.toml"
    pf.write_text(ssh_env.profile_toml("testhost", extra=f'python = "{sys.executable}"\nconnect_timeout = 3\n'
                                       + service_toml("a", free_port())))  # fmt: skip
    err = tmp_path / "err.txt"
    out = tmp_path / "out.txt"
    env = {**os.environ, "HOME": str(ssh_env.home)}
    argv = cli_argv("logs", "testhost/a", "-f", "-n", "1", "--profile", str(pf))
    with open(out, "w") as of, open(err, "w") as ef:
        proc = subprocess.Popen(argv, stdout=of, stderr=ef, env=env, cwd=tmp_path)
        try:
            _wait_for(out, "zero", proc)
            time.sleep(0.5)  # tail -F is following now
            with open(log, "a") as f:
                f.write("one\n")
            _wait_for(out, "one", proc)
            sshd.stop()
            _wait_for(err, "following again", proc)
            sshd.start()
            _wait_for(err, "reconnected", proc, timeout=40)
            time.sleep(1.0)
            with open(log, "a") as f:
                f.write("two\n")
            _wait_for(out, "two", proc)
            assert proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(10)


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        assert proc.poll() is None, (
            f"logs -f ended (rc {proc.returncode}) before {text!r}: {path.read_text()}"
        )
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path.name}: {path.read_text()[-500:]}")


async def test_doctor_gpu_fallen_off_the_bus_is_a_fail_for_its_service(tmp_path: Path) -> None:
    fh = FakeHost(tmp_path / "host")
    fh.nvidia_smi()
    rows = (fh.bin / "smi" / "gpus.csv").read_text().splitlines()
    lost = "1, " + ", ".join(["[GPU is lost]"] * (len(rows[1].split(",")) - 1))
    (fh.bin / "smi" / "gpus.csv").write_text(rows[0] + "\n" + lost + "\n")
    r = await doctor(fh.profile([svc(fh, name="on1", gpus=[1])]))
    f = find(r, "gpu-lost:1")
    assert f.status == "fail" and "fell off the bus" in f.evidence and "on1" in f.evidence, render(r)
    assert r.worst == "fail"
    r = await doctor(fh.profile([svc(fh, name="on0", gpus=[0])]))
    assert find(r, "gpu-lost:1").status == "warn"  # nobody here uses GPU 1


async def test_doctor_fails_a_workdir_another_user_controls(tmp_path: Path) -> None:
    """The launcher's trust check, seen by the doctor before any launch (issue 20 item 1)."""
    from tests.integration.test_attacks_local import attacker_workdir

    wd = attacker_workdir(tmp_path, tmp_path / "pwned")
    fh = FakeHost(tmp_path / "host")
    fh.nvidia_smi()
    r = await doctor(fh.profile([svc(fh)], workdir=str(wd)))
    f = find(r, "workdir")
    assert f.status == "fail" and "uid 65534" in f.evidence and "owned by" in f.evidence, render(r)
    assert not (tmp_path / "pwned").exists()
    ok = await doctor(fh.profile([svc(fh)]))
    assert find(ok, "workdir").status == "ok"

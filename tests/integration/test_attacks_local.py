"""Issue 20, on this machine (LocalTransport, real processes): an attacker's workdir, planted modules and
pidfiles, two launches at once, workers that outlive their main process, and secrets in every output."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddtree_tui import cli
from ddtree_tui.config import ProfileError, parse_profile
from ddtree_tui.services.launchline import argv_hash, build_launch
from ddtree_tui.services.lifecycle import ServiceManager
from tests.fixtures.services.support import (
    local_manager,
    processes_running,
    profile_toml,
    service_toml,
    service_workdir,
    starttime,
)
from tests.procs import alive
from tests.util import free_port

pytestmark = pytest.mark.timeout(90)

NOBODY = 65534
PLANT = "import pathlib; pathlib.Path({marker!r}).write_text('pwned')\n"


workdir = pytest.fixture(name="workdir")(service_workdir)


async def _manager(prof: Any, **kw: Any) -> ServiceManager:
    return (await local_manager(prof, **kw))[0]


def plant_modules(d: Path, marker: Path) -> None:
    """What another local user drops into a workdir they can write: modules our Python would import."""
    (d / "sglang").mkdir(parents=True, exist_ok=True)
    for rel in ("hashlib.py", "json.py", "sglang/__init__.py", "sglang/launch_server.py"):
        (d / rel).write_text(PLANT.format(marker=str(marker)))


def attacker_workdir(tmp_path: Path, marker: Path) -> Path:
    """/var/tmp/ddtree as another user left it: under a 1777 folder, owned by them, mode 0777, modules inside."""
    shared = tmp_path / "vartmp"
    shared.mkdir()
    shared.chmod(0o1777)
    wd = shared / "ddtree"
    wd.mkdir()
    plant_modules(wd, marker)
    for p in [wd, *wd.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    wd.chmod(0o777)
    return wd


def _mkdir_mode(d: Path, mode: int) -> None:
    d.mkdir(parents=True)
    d.chmod(mode)


def _mode(p: Path) -> int:
    return p.stat().st_mode & 0o777


async def test_group_writable_workdir_is_refused(workdir: Path) -> None:
    _mkdir_mode(workdir, 0o777)
    prof = parse_profile(profile_toml("loc", "local", workdir, service_toml("a", free_port())))
    m = await _manager(prof)
    r = await m.launch("a")
    assert not r.ok and "writable by group or others (mode 0777)" in r.message and "chmod 700" in r.message
    assert not (workdir / "run").exists()


async def test_new_workdir_is_created_0700_and_modules_in_it_are_never_imported(
    workdir: Path, tmp_path: Path
) -> None:
    """Our own workdir, with modules in it (left there, or by a co-admin): neither the wrapper (`-I`) nor
    the service (`python -m`, cwd = workdir; PYTHONSAFEPATH=1) imports them."""
    marker = tmp_path / "pwned"
    prof = parse_profile(profile_toml("loc", "local", workdir, service_toml("a", free_port())))
    m = await _manager(prof)
    try:
        r = await m.launch("a")  # creates the workdir
        assert r.ok, r.message
        assert _mode(workdir) == 0o700 and _mode(workdir / "run") == 0o700
        assert (await m.kill("a")).ok
        plant_modules(workdir, marker)
        r = await m.launch("a")
        assert r.ok, r.message
        st = await m.wait_state("a", {"ready", "crashed"}, 20)
        assert st.state == "ready", st  # the real (fake) sglang from PYTHONPATH, not the planted one
        assert not marker.exists(), "a module planted in the workdir was imported"
    finally:
        await m.kill("a")


def _start_sleep() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


async def test_pidfile_forged_from_proc_never_gets_a_process_signalled(workdir: Path) -> None:
    """The attack: a pidfile naming someone's process with its real start time and the hash of its real
    command line (all readable from /proc). It is not the argv we would run for the spec: never signalled."""
    prof = parse_profile(profile_toml("loc", "local", workdir, service_toml("f", free_port())))
    victim = _start_sleep()
    try:
        argv = ["sleep", "60"]
        rec = {"pid": victim.pid, "pgid": victim.pid, "starttime": starttime(victim.pid), "argv": argv,
               "argv_hash": argv_hash(argv), "port": 1, "started_at": 0}  # fmt: skip
        (workdir / "run").mkdir(parents=True)
        (workdir / "run" / "f.json").write_text(json.dumps(rec))
        m = await _manager(prof)
        await m.refresh()
        assert m.status("f").state == "crashed"
        k = await m.kill("f", timeout=0.5)
        assert not k.ok and f"refused to signal pid {victim.pid}" in k.message, k.message
        await asyncio.sleep(0.3)
        assert victim.poll() is None  # never signalled
    finally:
        victim.kill()
        victim.wait()


async def test_concurrent_launches_spawn_one_service(workdir: Path) -> None:
    """Four launches of one service at once (two TUIs, a script): one spawns, the others find it running."""
    prof = parse_profile(profile_toml("loc", "local", workdir, service_toml("a", free_port())))
    managers = [await _manager(prof) for _ in range(4)]
    argv = build_launch(prof, prof.services[0]).argv
    try:
        results = await asyncio.gather(*(m.launch("a") for m in managers))
        oks = [r for r in results if r.ok]
        assert len(oks) == 1, [r.message for r in results]
        assert all("already running" in r.message for r in results if not r.ok), [r.message for r in results]
        st = await managers[0].wait_state("a", {"ready"}, 20)
        assert st.state == "ready"
        assert processes_running(argv) == [oks[0].status.pid]
        rec = json.loads((workdir / "run" / "a.json").read_text())
        assert rec["pid"] == oks[0].status.pid
        k = await managers[1].kill("a")  # any manager can end it: it is tracked
        assert k.ok, k.message
        assert processes_running(argv) == []
    finally:
        await managers[0].kill("a")


async def test_workers_outliving_their_main_pid_show_degraded_and_kill_ends_them(workdir: Path) -> None:
    prof = parse_profile(
        profile_toml("loc", "local", workdir, service_toml("g", free_port(), env={"FAKE_CHILD": "1"}))
    )
    m = await _manager(prof)
    try:
        r = await m.launch("g")
        assert r.ok, r.message
        main = r.status.pid
        assert (await m.wait_state("g", {"ready"}, 20)).state == "ready"
        for _ in range(100):
            await m.refresh()
            workers = [p for p in m.service_pids() if p != main and alive(p)]
            if any("time.sleep(600)" in " ".join(_cmd(p)) for p in workers):
                break
            await asyncio.sleep(0.05)
        child = next(p for p in m.service_pids() if "time.sleep(600)" in " ".join(_cmd(p)))
        os.kill(main, signal.SIGKILL)  # the OOM killer, say
        for _ in range(100):
            await m.refresh()
            if m.status("g").state == "crashed":
                break
            await asyncio.sleep(0.05)
        st = m.status("g")
        assert st.state == "crashed"
        assert (st.detail or "").startswith(f"degraded: main pid {main} killed by signal 9"), st.detail
        assert "1 process still alive" in (st.detail or "") and str(child) in (st.detail or "")
        assert child in m.service_pids()  # its GPU memory is still the service's
        again = await m.launch("g")
        assert not again.ok and "degraded" in again.message
        k = await m.kill("g", timeout=2)
        assert k.ok, k.message
        assert "ended 1 process of its group" in k.message and str(child) in k.message
        assert not alive(child)
        assert m.status("g").state == "stopped"
    finally:
        await m.kill("g", timeout=1)


def _cmd(pid: int) -> list[str]:
    try:
        return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
    except OSError:
        return []


SECRETS = {"WANDB_KEY": "wandb-s3cret", "PRIVATE_KEY": "priv-s3cret", "AWS_ACCESS_KEY_ID": "aws-s3cret"}
API_KEY = "api-s3cret-value"


def _secret_service(port: int, crash: bool = False) -> str:
    env = {**SECRETS, "FAKE_PRINT_ARGS": "1", **({"FAKE_CRASH_AFTER": "0.8"} if crash else {})}
    return service_toml(
        "s", port, env=env, extra=f'extra_args = ["--api-key", "{API_KEY}", "--hf-token=hf-s3cret"]'
    )


ALL_SECRETS = [*SECRETS.values(), API_KEY, "hf-s3cret"]


def _clean(text: str, where: str) -> None:
    for s in ALL_SECRETS:
        assert s not in text, f"secret {s!r} leaked in {where}: {text[:400]}"


def test_secrets_never_leave_through_any_channel(
    workdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pf = tmp_path / "loc.toml"
    pf.write_text(profile_toml("loc", "local", workdir, _secret_service(free_port(), crash=True)))
    prof = parse_profile(pf.read_text())
    cmd = build_launch(prof, prof.services[0])
    assert API_KEY in cmd.argv  # SGLang takes --api-key only on its command line
    # dry run: the shell line the CLI prints
    assert cli.main(["launch", "loc/s", "--dry-run", "--profile", str(pf)]) == 0
    out = capsys.readouterr().out
    _clean(out, "launch --dry-run")
    assert "--api-key '***'" in out and "'WANDB_KEY=***'" in out, out
    asyncio.run(_secret_channels(prof, workdir))
    # status --json and logs through the CLI
    assert cli.main(["status", "--json", "--profile", str(pf), "--timeout", "10"]) in (0, 1)
    status = capsys.readouterr().out
    assert '"last_log"' in status
    _clean(status, "status --json")
    assert cli.main(["logs", "loc/s", "-n", "50", "--profile", str(pf)]) == 0
    logs = capsys.readouterr().out
    assert "server_args=ServerArgs" in logs
    _clean(logs, "ddtree-tui logs")


async def _secret_channels(prof, workdir: Path) -> None:
    lines: list[str] = []
    m = await _manager(prof, on_log=lambda n, line: lines.append(line))
    await m.start()
    try:
        # --hf-token is no 0.5.23 flag: the host-parser preflight refuses, and its refusal names the flag
        # without the value
        refused = await m.launch("s")
        assert not refused.ok and "--hf-token" in refused.message, refused.message
        _clean(refused.message + str(refused.suggestion), "the preflight refusal")
        r = await m.launch("s", force=True)
        assert r.ok, r.message
        _clean(r.message + str(r.suggestion), "the launch result")
        rec_text = _read(workdir / "run" / "s.json")
        _clean(rec_text, "the pidfile")
        rec = json.loads(rec_text)
        wrapper_cmd = " ".join(_cmd(rec["wrapper_pid"]))
        assert wrapper_cmd, "the wrapper should still run"
        _clean(wrapper_cmd, "ps of the wrapper")
        st = await m.wait_state("s", {"crashed"}, 20)
        assert st.state == "crashed"
        assert any("server_args=ServerArgs" in x for x in st.last_log), st.last_log  # the fake printed them
        _clean(json.dumps(st.model_dump()), "status last_log / detail")
        _clean("\n".join(lines), "followed log lines")
        _clean("\n".join(await m.read_log("s", 50)), "logs")
        ours = [x for x in _read(workdir / "logs" / "s.log").splitlines() if x.startswith("[ddtree-tui]")]
        assert ours and any("launching s:" in x for x in ours)
        _clean("\n".join(ours), "our lines in the log file")
    finally:
        await m.stop()


def _read(p: Path) -> str:
    return p.read_text()


async def test_newline_in_extra_args_cannot_forge_a_log_line(workdir: Path) -> None:
    forged = "[ddtree-tui] n exited: status 0"
    extra = 'extra_args = ["x\\n' + forged + '"]'
    prof = parse_profile(profile_toml("loc", "local", workdir, service_toml("n", free_port(), extra=extra)))
    assert any("\n" in a for a in prof.services[0].extra_args)
    m = await _manager(prof)
    try:
        refused = await m.launch("n")  # "x\n..." is no SGLang flag: the preflight refuses, on one line
        assert not refused.ok and "\n" not in refused.message, refused.message
        r = await m.launch("n", force=True)
        assert r.ok, r.message
    finally:
        await m.kill("n")
    log = _read(workdir / "logs" / "n.log").splitlines()
    assert any(x.startswith("[ddtree-tui]") and "launching n:" in x for x in log)
    assert not any(x.startswith(forged) for x in log), log


@pytest.mark.parametrize("wd", ["~/ddt-wd", "ddt-wd", "./x"])
def test_remote_workdir_must_be_absolute(wd: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = f'name = "r"\naddress = "somehost"\nworkdir = "{wd}"\n' + service_toml("a", 30010)
    with pytest.raises(ProfileError) as e:
        parse_profile(text, "r.toml")
    assert "r.toml:3" in str(e.value) and "absolute path" in str(e.value)
    pf = tmp_path / "r.toml"
    pf.write_text(text)
    home_before = set(Path.home().iterdir()) if Path.home().is_dir() else set()
    assert cli.main(["launch", "r/a", "--profile", str(pf)]) == 2
    assert "absolute path" in capsys.readouterr().err
    assert not (Path.home() / "~").exists() or (Path.home() / "~") in home_before


def test_host_program_refuses_a_relative_workdir(tmp_path: Path) -> None:
    """Even a payload that slips past the profile: the host program names the problem, creates nothing."""
    from ddtree_tui.services import hostscripts

    cfg = {"workdir": "~/ddt-wd", "pidfile": "~/ddt-wd/run/a.json", "log": "~/ddt-wd/logs/a.log"}
    res = subprocess.run([sys.executable, "-I", "-c", hostscripts.LAUNCH], input=json.dumps(cfg), text=True,
                         capture_output=True, timeout=30, cwd=tmp_path)  # fmt: skip
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["reason"] == "workdir" and "not absolute" in out["why"]
    assert not (tmp_path / "~").exists()

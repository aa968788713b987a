"""What one child process of each kind costs to start (issue 24): the simulator, the CLI's modes, the bench
worker, in this tree and, side by side, in another (`--compare DIR`: a checkout, or a git revision whose
`ddtree_tui/` is taken out with `git archive`). Each command runs in a fresh interpreter with the other tree
first on PYTHONPATH, the two trees alternated, `--runs` times each; CPU is user + sys of the process and of
the children it waited for (os.wait4 via RUSAGE_CHILDREN), shown as the median and the ratio this/other.
"modules" is how many modules that process imported (`-X importtime` lines, one extra run each).

`--log FILE` instead summarises a `DDTREE_PROC_LOG=FILE` run (cli/proclog.py: one line per `ddtree-tui`
process that exited): per mode, how many processes, their median start-up CPU and exit CPU, and the totals.

    .venv/bin/python benchmarks/process_starts.py --compare main --runs 5
    DDTREE_PROC_LOG=/tmp/starts.jsonl scripts/test; .venv/bin/python benchmarks/process_starts.py --log /tmp/starts.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLI_PROGS = {
    "__main__.py",
    "ddtree-tui",
    "cli_batch.py",
}  # argv[0] of a CLI child (cli_batch: several in one)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env_for(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "DDTREE_PROC_LOG")}
    env["PYTHONPATH"] = str(tree)
    env["DDTREE_SIM_TIME_SCALE"] = "10"  # the demo's sims: what is counted is the start, not the pace
    return env


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ddtree_tui.cli", *args]


def wait_health(url: str, proc: subprocess.Popen[bytes], limit: float = 30.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"no healthy server at {url}")


def run_sim(tree: Path, work: Path, importtime: bool) -> tuple[float, int]:
    """A simulator started, answering /health, stopped by SIGTERM: its CPU and modules."""
    port = free_port()
    argv = cli("sim", "--port", str(port), "--load-time", "0")
    if importtime:
        argv.insert(1, "-Ximporttime")
    c0 = children_cpu()
    p = subprocess.Popen(argv, cwd=work, env=env_for(tree), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_health(f"http://127.0.0.1:{port}", p)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    return children_cpu() - c0, err.decode(errors="replace").count("import time:") - 1


def run_cmd(tree: Path, work: Path, argv: list[str], importtime: bool) -> tuple[float, int]:
    if importtime:
        argv = [argv[0], "-Ximporttime", *argv[1:]]
    c0 = children_cpu()
    p = subprocess.run(argv, cwd=work, env=env_for(tree), capture_output=True, timeout=300)
    cpu = children_cpu() - c0
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{argv}: exit {p.returncode}\n{p.stderr.decode(errors='replace')[-2000:]}")
    return cpu, p.stderr.decode(errors="replace").count("import time:") - 1


def commands(work: Path, url: str, run_json: Path) -> dict[str, list[str]]:
    """The entry points the tests start, each as a command that starts nothing we must stop."""
    profile = work / "empty.toml"
    profile.write_text('name = "here"\naddress = "local"\nworkdir = "w"\n[telemetry]\nsource = "none"\n')
    return {
        "--help": cli("--help"),
        "status --json (1 host, no services)": cli("status", "--json", "--profile", str(profile)),
        "--run-bench --url (4 requests)": cli(
            "--run-bench",
            "--url",
            url,
            "--requests",
            "4",
            "--max-new-tokens",
            "16",
            "--workers",
            "1",
            "--history",
            str(work / "h.jsonl"),
        ),
        "--run-bench --demo (2 requests, 2 sims)": cli(
            "--run-bench",
            "--demo",
            "--requests",
            "2",
            "--max-new-tokens",
            "16",
            "--workers",
            "1",
            "--history",
            str(work / "h.jsonl"),
        ),
        "report RUN.json": cli("report", str(run_json)),
        "bench worker (import)": [sys.executable, "-c", "import ddtree_tui.benchworker"],
    }


def extract(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "ddtree_tui", "hostprofiles"],
        check=True,
        capture_output=True,
    ).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def compare(other_arg: str, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ddtree-starts-") as tmp:
        t = Path(tmp)
        other = Path(other_arg) if Path(other_arg).is_dir() else extract(other_arg, t / "other")
        trees = {"other": other.resolve(), "this": REPO}
        works = {k: t / f"work-{k}" for k in trees}
        for w in works.values():
            w.mkdir()
        # one server the --url runs measure, and one run's JSON for `report`, made by this tree
        port = free_port()
        server = subprocess.Popen(
            cli("sim", "--port", str(port), "--load-time", "0", "--decode-rate", "400"),
            env=env_for(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_health(url, server)
            run_json = t / "run.json"
            subprocess.run(
                cli("--run-bench", "--url", url, "--requests", "2", "--max-new-tokens", "8", "--json",
                    str(run_json), "--history", str(t / "h0.jsonl")),
                env=env_for(REPO), capture_output=True, check=True, timeout=120,
            )  # fmt: skip
            names = ["sim (start, /health, SIGTERM)", *commands(works["this"], url, run_json)]
            cpu: dict[tuple[str, str], list[float]] = defaultdict(list)
            mods: dict[tuple[str, str], int] = {}
            for i in range(runs + 1):
                for side, tree in trees.items():
                    cmds = commands(works[side], url, run_json)
                    for name in names:
                        it = i == 0  # the first round counts modules (importtime adds its own cost)
                        if name.startswith("sim "):
                            c, m = run_sim(tree, works[side], it)
                        else:
                            c, m = run_cmd(tree, works[side], cmds[name], it)
                        if it:
                            mods[(side, name)] = m
                        else:
                            cpu[(side, name)].append(c)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    print(f"{'entry point':<40} {'modules':>15} {'CPU s (median)':>17} {'ratio':>6}")
    print(f"{'':<40} {'other':>7} {'this':>7} {'other':>8} {'this':>8} {'this/other':>10}")
    for name in names:
        a, b = (statistics.median(cpu[(s, name)]) for s in ("other", "this"))
        print(
            f"{name:<40} {mods[('other', name)]:>7} {mods[('this', name)]:>7} {a:>8.3f} {b:>8.3f} {b / a:>10.2f}"
        )
    print(
        f"(other: {other_arg}; {runs} runs each, alternated; CPU includes the children a command waited for)"
    )


def summarise(log: Path) -> None:
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            if rec.get("prog", "__main__.py") not in CLI_PROGS:  # a test process that called cli.main itself
                continue
            rows[rec.get("mode") or " ".join(rec["argv"])].append(rec)
    print(
        f"{'mode':<12} {'count':>6} {'start CPU s':>12} {'exit CPU s':>11} {'total CPU s':>12} {'modules':>8}"
    )
    total_n = total_start = total_cpu = 0.0
    for mode, recs in sorted(rows.items(), key=lambda kv: -sum(r["cpu_s"] for r in kv[1])):
        starts = [r["start_cpu_s"] for r in recs if r["start_cpu_s"] is not None]
        med_start = statistics.median(starts) if starts else float("nan")
        cpus = [r["cpu_s"] for r in recs]
        print(
            f"{mode:<12} {len(recs):>6} {med_start:>12.3f} {statistics.median(cpus):>11.3f} {sum(cpus):>12.1f} "
            f"{statistics.median(r['start_modules'] or 0 for r in recs):>8.0f}"
        )
        total_n += len(recs)
        total_start += sum(starts)
        total_cpu += sum(cpus)
    print(
        f"{'all':<12} {total_n:>6.0f} {'':>12} {'':>11} {total_cpu:>12.1f}   (start-up alone: {total_start:.1f} s)"
    )
    print("(start CPU: median CPU when the handler began; exit CPU: median at exit; per process, user + sys)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", metavar="DIR|REV", help="the other tree: a checkout, or a git revision")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--log", type=Path, metavar="FILE", help="summarise a DDTREE_PROC_LOG file instead")
    ns = ap.parse_args()
    if ns.log:
        summarise(ns.log)
    else:
        compare(ns.compare or "main", ns.runs)


if __name__ == "__main__":
    main()

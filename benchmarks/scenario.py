"""How long the whole reference deployment takes with ddtree-tui, setup to teardown: two hosts behind two real
sshd processes (fake GPU environments, simulated SGLang services), the doctor, a refused port and the edited
profile, two launches to ready, smoke generations, an interleaved seed3 benchmark, todos verifying
themselves, a GPU fault on CT129 and the service moved to CT200, everything killed and checked gone.

The same steps as tests/scenario/test_reference_story.py (it reuses its helpers). The original took hours
of manual work across ssh windows. Prints one table of step timings (the median over --rounds).
Run: python benchmarks/scenario.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ is importable from a checkout

from tests.scenario.helpers import Timer, build_world, kill_strays, play_story
from tests.sshd import SshEnv


async def one_round() -> tuple[list[tuple[str, float]], float, list[str]]:
    """One full scenario in a fresh temp dir and temp HOME; (steps, total seconds, problems seen)."""
    with tempfile.TemporaryDirectory(prefix="ddtree-scenario-") as d:
        root = Path(d)
        old_home = os.environ.get("HOME")
        t0 = time.monotonic()
        timer = Timer()
        env = SshEnv(root)
        os.environ["HOME"] = str(env.home)  # asyncssh reads ~/.ssh/config from HOME
        world = None
        problems: list[str] = []
        try:
            async with timer.step("setup: 2 sshd + fake hosts"):
                world = build_world(root, env)
            res = await play_story(world, timer)
            if not (res.move and res.move.ok):
                problems.append(f"move failed: {res.move}")
            if res.leftover_sims or res.leftover_procs:
                problems.append(f"left behind: {res.leftover_sims + res.leftover_procs}")
            if not all(k.ok for k in res.kills.values()):
                problems.append("a kill failed")
        finally:
            async with timer.step("teardown: sshd stop"):
                if world is not None:
                    kill_strays(world)
                env.stop()
            if old_home is not None:
                os.environ["HOME"] = old_home
        return timer.steps, time.monotonic() - t0, problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    per_step: dict[str, list[float]] = {}
    totals: list[float] = []
    for n in range(a.rounds):
        steps, total, problems = asyncio.run(one_round())
        for name, s in steps:
            per_step.setdefault(name, []).append(s)
        totals.append(total)
        print(
            f"round {n + 1}: {total:.2f} s" + (f"  PROBLEMS: {problems}" if problems else ""), file=sys.stderr
        )
    width = max(len(k) for k in per_step)
    print(f"{'step':<{width}}  {'median s':>9}  {'min s':>7}  {'max s':>7}")
    print(f"{'-' * width}  {'-' * 9}  {'-' * 7}  {'-' * 7}")
    for name, xs in per_step.items():
        print(f"{name:<{width}}  {statistics.median(xs):9.2f}  {min(xs):7.2f}  {max(xs):7.2f}")
    print(f"{'-' * width}  {'-' * 9}  {'-' * 7}  {'-' * 7}")
    total = "TOTAL (setup to teardown)"
    print(f"{total:<{width}}  {statistics.median(totals):9.2f}  {min(totals):7.2f}  {max(totals):7.2f}")


if __name__ == "__main__":
    main()

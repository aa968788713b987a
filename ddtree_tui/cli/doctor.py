"""`ddtree-tui doctor [HOST] [--json]`: the preflight checks of every host (or one), printed or as JSON.

Headless, through the same door as the TUI: a Fleet without telemetry asks `fleet.doctor(host)` for each
host at once. Exit codes: 0 all ok/warn, 1 any fail, 2 bad usage.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from ddtree_tui.cli.args import DoctorArgs
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, handler, hosts_of
from ddtree_tui.config import HostProfile
from ddtree_tui.doctor import DoctorReport, Finding, render
from ddtree_tui.fleet import Fleet


async def _doctor_hosts(profiles: Sequence[HostProfile], todos: Path | None = None) -> list[DoctorReport]:
    async with Fleet.open(profiles, todos_path=todos, telemetry=False, auto_complete_todos=False) as fleet:

        async def one(p: HostProfile) -> DoctorReport:
            try:
                return await fleet.doctor(p.name)
            except Exception as e:  # a bug in one check must not hide the other hosts
                return DoctorReport(
                    host=p.name,
                    address=p.address,
                    findings=[Finding(check="doctor", status="fail", evidence=f"{type(e).__name__}: {e}")],
                )

        return list(await asyncio.gather(*(one(p) for p in profiles)))


@handler("doctor", DoctorArgs)
def cli_main(args: DoctorArgs) -> int:
    """`ddtree-tui doctor [HOST] [--json]`: 0 all ok/warn, 1 any fail, 2 bad usage."""
    profiles = hosts_of(args, args.host)
    reports = asyncio.run(_doctor_hosts(profiles, Path(args.todos) if args.todos else None))
    if args.as_json:
        print(json.dumps({"schema": 1, "hosts": [r.model_dump(mode="json") for r in reports]}, indent=2))
    else:
        print("\n\n".join(render(r) for r in reports))
    return EXIT_FAIL if any(r.worst == "fail" for r in reports) else EXIT_OK

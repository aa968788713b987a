"""`ddtree-tui status [--json]`: one snapshot of hosts, GPUs and services (fleet.collect_snapshot), as the
documented JSON object or the plain-text table a person reads in a terminal or a log."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from ddtree_tui.cli.args import StatusArgs
from ddtree_tui.cli.common import handler, profiles_of
from ddtree_tui.fleet import collect_snapshot
from ddtree_tui.model.snapshot import FleetSnapshot, HostView


def _fmt(v: object, unit: str = "", nd: int = 0) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}{unit}"
    return f"{v}{unit}"


def render_text(snap: FleetSnapshot) -> str:
    """The plain-text status table a person reads in a terminal or a log."""
    out: list[str] = []
    for h in snap.hosts:
        out.append(_host_line(h))
        if h.telemetry.source or h.telemetry.note or h.telemetry.fault:
            bits = [f"gpu source: {h.telemetry.source or '-'}"]
            if h.telemetry.note:
                bits.append(h.telemetry.note)
            if h.telemetry.fault:
                bits.append(f"FAULT: {h.telemetry.fault}")
            out.append("  " + "; ".join(bits))
        for g in h.gpus:
            mem = f"{_fmt(g.mem_used_mb)}/{_fmt(g.mem_total_mb)} MiB"
            line = (
                f"  gpu {g.index} {g.name or '?'}: util {_fmt(g.util_gpu, '%')} mem {mem} "
                f"temp {_fmt(g.temp_c, 'C')} power {_fmt(g.power_w, 'W')}/{_fmt(g.power_limit_w, 'W')}"
            )
            if g.service:
                line += f" [{g.service}]"
            if g.health != "ok":
                line += f" FAULT: {g.fault}"
            out.append(line)
        for s in h.services:
            mode = f" {s.mode}" if s.mode and s.mode != "-" else ""
            sim = " (simulated)" if s.simulated else ""
            line = (
                f"  service {s.name}: {s.state} {s.algorithm}{mode}{sim} port {s.port} pid {_fmt(s.pid)} "
                f"accept {_fmt(s.accept_length or None, nd=2)} throughput {_fmt(s.gen_throughput, ' tok/s', 1)}"
            )
            if s.detail and s.state != "ready":
                line += f" — {s.detail}"
            out.append(line)
    if not snap.hosts:
        out.append("no host profiles found (looked in ./hostprofiles and the user config directory)")
    return "\n".join(out)


def _host_line(h: HostView) -> str:
    line = f"{h.name} ({h.address}): {h.state}"
    if h.error:
        line += f" — {h.error}"
    if h.next_retry_at:
        line += f" (retry in {max(0.0, h.next_retry_at - time.time()):.0f}s)"
    if h.host:
        hs = h.host
        line += (
            f"  cpu {_fmt(hs.cpu_percent, '%')} load {_fmt(hs.load1, nd=2)} "
            f"mem {_fmt(hs.mem_used_mb)}/{_fmt(hs.mem_total_mb)} MiB disk free {_fmt(hs.disk_free_mb)} MiB"
        )
    return line


@handler("status", StatusArgs)
def status_main(args: StatusArgs) -> int:
    todos = Path(args.todos) if args.todos else None  # the list whose evidence the document carries
    snap = asyncio.run(collect_snapshot(profiles_of(args), timeout=args.timeout, todos_path=todos))
    if args.as_json:
        print(json.dumps(snap.to_json_dict(), indent=2))
    else:
        print(render_text(snap))
    # 0: every host answered; 1: some host could not be reached (the snapshot still shows what is known)
    return 0 if all(h.state == "connected" for h in snap.hosts) else 1

"""Headless one-shot modes that read the core's state: `status [--json]`, `smoke HOST/SVC [--json]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ddtree_tui.config import HostProfile, ProfileError, find_service, resolve_profiles
from ddtree_tui.state import FleetSnapshot, HostView

if TYPE_CHECKING:
    from ddtree_tui.bench.smoke import SmokeResult


async def collect_snapshot(
    profiles: Sequence[HostProfile], timeout: float = 8.0, *, telemetry: bool = True
) -> FleetSnapshot:
    """One snapshot of every host: connect, wait for a first sample and service probe, then let go."""
    from ddtree_tui.fleet import Fleet

    fleet = Fleet(profiles, telemetry=telemetry, auto_complete_todos=False)
    await fleet.start()
    try:
        await fleet.wait_settled(timeout)
        return fleet.snapshot()
    finally:
        await fleet.stop()


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


def status_main(ns: argparse.Namespace) -> int:
    try:
        profiles = resolve_profiles(ns.profile, ns.profiles, ns.demo)
    except ProfileError as e:
        print(f"ddtree-tui: {e}", file=sys.stderr)
        return 2
    snap = asyncio.run(collect_snapshot(profiles, timeout=ns.timeout))
    if ns.json:
        print(json.dumps(snap.to_json_dict(), indent=2))
    else:
        print(render_text(snap))
    # 0: every host answered; 1: some host could not be reached (the snapshot still shows what is known)
    return 0 if all(h.state == "connected" for h in snap.hosts) else 1


async def run_smoke(
    profiles: Sequence[HostProfile],
    ref: str,
    prompt: str,
    max_new_tokens: int,
    timeout: float,
    api: str = "generate",
    model: str | None = None,
) -> SmokeResult:
    """Start a fleet without telemetry (a smoke test needs no GPU numbers), send the request, let go."""
    from ddtree_tui.fleet import Fleet

    fleet = Fleet(profiles, telemetry=False, auto_complete_todos=False)
    await fleet.start()
    try:
        return await fleet.smoke(
            ref, prompt=prompt, max_new_tokens=max_new_tokens, timeout=timeout, api=api, model=model
        )
    finally:
        await fleet.stop()


def smoke_main(ns: argparse.Namespace) -> int:
    """`smoke HOST/SVC|URL`: exit 0 when the service answered, 1 when it did not (an aborted request too),
    2 for a bad profile or ref."""
    api = getattr(ns, "api", "generate")
    model = getattr(ns, "model", None)
    if ns.max_new_tokens < 1 or ns.timeout <= 0:
        print("ddtree-tui: --max-new-tokens and --timeout must be positive", file=sys.stderr)
        return 2
    if ns.service.startswith(("http://", "https://")):
        from ddtree_tui.bench.session import url_list, url_ref
        from ddtree_tui.bench.smoke import smoke_request

        try:
            urls = url_list(ns.service)
            if len(urls) != 1:
                raise ValueError("smoke takes one URL")
            url = urls[0]
        except ValueError as e:
            print(f"ddtree-tui: {e}", file=sys.stderr)
            return 2
        res = asyncio.run(
            smoke_request(
                url_ref(url),
                url,
                algorithm="baseline",
                prompt=ns.prompt,
                max_new_tokens=ns.max_new_tokens,
                timeout=ns.timeout,
                api=api,
                model=model,
            )
        )
    else:
        try:
            profiles = resolve_profiles(ns.profile, ns.profiles, ns.demo)
            find_service(profiles, ns.service)
        except (ProfileError, ValueError) as e:
            print(f"ddtree-tui: {e}", file=sys.stderr)
            return 2
        res = asyncio.run(
            run_smoke(profiles, ns.service, ns.prompt, ns.max_new_tokens, ns.timeout, api=api, model=model)
        )
    if ns.json:
        print(json.dumps(res.model_dump(mode="json"), indent=2))
    else:
        print(res.line())
    return 0 if res.ok else 1

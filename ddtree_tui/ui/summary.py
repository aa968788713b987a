"""The top bar: what the app is (demo, snapshot), counts of hosts, GPUs and services by state, the driver
version and a clock. Pure: built from a FleetSnapshot and a time, so it is unit-tested without Textual."""

from __future__ import annotations

import time
from collections import Counter

from ddtree_tui.model.snapshot import FleetSnapshot, ServiceState

# the order states are listed in, with the mark the services pane uses for them
STATE_MARKS: tuple[tuple[ServiceState, str], ...] = (
    ("ready", "●"),
    ("starting", "◌"),
    ("unhealthy", "▲"),
    ("crashed", "✖"),
    ("stopped", "○"),
    ("unknown", "?"),
)


def counts(snap: FleetSnapshot) -> dict[str, str]:
    """Short texts: hosts up/total, GPUs (and faults), services by state, driver versions."""
    hosts = snap.hosts
    up = sum(1 for h in hosts if h.state == "connected")
    gpus = [g for h in hosts for g in h.gpus]
    faults = sum(1 for g in gpus if g.health == "fault" or g.fault)
    states = Counter(s.state for h in hosts for s in h.services)
    svc = " ".join(f"{mark}{states[st]} {st}" for st, mark in STATE_MARKS if states[st])
    drivers = sorted({h.telemetry.driver_version for h in hosts if h.telemetry.driver_version})
    cudas = sorted({h.telemetry.cuda_version for h in hosts if h.telemetry.cuda_version})
    return {
        "hosts": f"hosts {up}/{len(hosts)} up",
        "gpus": f"GPUs {len(gpus)}" + (f" ({faults} fault)" if faults else ""),
        "services": f"services {svc}" if svc else "no services",
        "driver": (f"driver {', '.join(drivers)}" if drivers else "")
        + (f" · CUDA {', '.join(cudas)}" if cudas else ""),
    }


def topbar(snap: FleetSnapshot, now: float, mode: str, width: int, short: str | None = None) -> str:
    """One line: `ddtree-tui · MODE` on the left, counts and the clock on the right. What does not fit is
    dropped whole, least useful first (driver, the mode's explanation, GPU count, state words), never cut
    mid-word; the mode word itself (DEMO) and the clock stay."""
    c = counts(snap)
    clock = time.strftime("%H:%M:%S", time.localtime(now))
    left = f"ddtree-tui · {mode}" if mode else "ddtree-tui"
    short_left = f"ddtree-tui · {short}" if short else left.split(":", 1)[0]
    states = Counter(s.state for h in snap.hosts for s in h.services)
    marks = " ".join(f"{mark}{states[st]}" for st, mark in STATE_MARKS if states[st]) or "-"
    hosts_short = c["hosts"].removesuffix(" up")
    n_gpus = sum(len(h.gpus) for h in snap.hosts)
    candidates = [
        (left, [c["hosts"], c["gpus"], c["services"], c["driver"], clock]),
        (left, [c["hosts"], c["gpus"], c["services"], clock]),
        (short_left, [c["hosts"], c["gpus"], c["services"], c["driver"], clock]),
        (short_left, [c["hosts"], c["gpus"], c["services"], clock]),
        (short_left, [c["hosts"], c["services"], clock]),
        (short_left, [hosts_short, c["gpus"], f"services {marks}", clock]),
        (short_left, [hosts_short, f"GPUs {n_gpus}", f"svc {marks}", clock]),  # 80 columns keep the GPU count
        (short_left, [hosts_short, f"GPUs {n_gpus}", marks, clock]),
        (short_left, [hosts_short, f"services {marks}", clock]),
        (short_left, [marks, clock]),
        (short_left, [clock]),
    ]
    for lft, parts in candidates:
        right = " · ".join(p for p in parts if p)
        if len(lft) + 2 + len(right) <= width:
            return lft + " " * (width - len(lft) - len(right)) + right
    return f"{short_left}  {marks}  {clock}"[:width]

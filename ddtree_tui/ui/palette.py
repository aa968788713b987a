"""The command palette (ctrl+p): every action for every host and service, plus themes and panes. Built from
the profiles and the latest snapshot, so a service moved to another host shows up there."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost


def open_sweep(app: AppHost, ref: str | None = None) -> None:
    """The Sweep screen; its module (and the sweep engine's) imported on first use, not before the first
    frame (issue 28: first paint)."""
    from ddtree_tui.ui.sweep_screen import open_sweep as _open

    _open(app, ref)


def palette_commands(app: AppHost) -> list[tuple[str, str, Callable[[], object]]]:
    """(title, help, callback) for everything the palette offers."""
    out: list[tuple[str, str, Callable[[], object]]] = []
    snap = app.current_snapshot()
    hosts = [h.name for h in snap.hosts] or [p.name for p in app.fleet.profiles()]
    refs: list[str] = []
    for h in snap.hosts:
        refs += [f"{h.name}/{s.name}" for s in h.services]
    if not refs:
        for p in app.fleet.profiles():
            refs += [f"{p.name}/{s.name}" for s in p.services]
    readonly = app.read_only_reason() is not None  # issue 28: intents are not offered in a read-only view
    for ref in refs:
        for verb, what in (
            ("launch", "start the service and wait until it is ready"),
            ("kill", "stop the service (asks first)"),
            ("restart", "redeploy: kill then launch with the same spec (asks first)"),
            ("logs", "show and follow its log"),
            ("bench", "benchmark it"),
            ("smoke", "one short /generate request: does it answer? (key s in the services pane)"),
        ):
            if not (readonly and verb in ("launch", "kill", "restart", "bench")):
                out.append((f"{verb} {ref}", what, partial(app.request_service, verb, ref)))
        if readonly:
            continue
        out.append((f"sweep {ref}", "tuning lab: redeploy over settings, measure, apply the best (key w)",
                    partial(open_sweep, app, ref)))  # fmt: skip
        here = ref.split("/", 1)[0]
        for other in hosts:
            if other != here:
                out.append(
                    (
                        f"move {ref} → {other}",
                        "launch on the other host, then kill here (asks first)",
                        partial(app.request_service, "move", ref, other),
                    )
                )
    for name in hosts:
        out.append((f"gpus of {name}", "narrow the GPU pane to this host", partial(app.select_host, name)))
    for name in hosts:
        out.append((f"doctor {name}", "preflight checks of the host (key D)", partial(app.open_doctor, name)))
    out.append(("reload profiles", "re-read the host profiles from disk (key R)", app.action_reload_profiles))
    out.append(("gpus of all hosts", "show every host's GPUs", partial(app.select_host, None)))
    for name in app.theme_names():
        out.append((f"theme {name}", "switch the colour theme", partial(app.set_theme_name, name)))
    for n, title in app.pane_titles().items():
        out.append((f"focus {title.lower()} pane", f"key {n}", partial(app.action_focus_pane, n)))
    if not readonly:
        out.append(("bench: choose services", "open the benchmark dialog", app.action_bench))
    if app.bench.running:  # issue 28: what runs can be stopped from the palette too
        out.append(("stop the run in flight", "stop the bench / ladder / soak, saving what was measured (x)",
                    app.bench.stop))  # fmt: skip
    screen = app.screen
    sweeps = sys.modules.get("ddtree_tui.ui.sweep_screen")  # not imported yet: no Sweep screen was opened
    if sweeps is not None and isinstance(screen, sweeps.SweepScreen) and screen.running:
        out.append(("stop the sweep", "stop after the current point; the service is put back (x)",
                    screen.action_stop))  # fmt: skip
    if not readonly:
        out.append(("new todo", "add an item to the checklist", app.action_new_todo))
    out.append(("help: keys", "every key binding", app.action_help))
    out.append(("quit", "stop what the demo started and leave", app.action_quit))
    return out


class FleetCommands(Provider):
    """Palette provider over palette_commands()."""

    async def discover(self) -> Hits:
        for title, help_, cb in palette_commands(self.app):  # type: ignore[arg-type]
            yield DiscoveryHit(title, cb, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_, cb in palette_commands(self.app):  # type: ignore[arg-type]
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), cb, help=help_)

"""`AppHost`: the app as its action modules see it (service, bench and todo actions, the palette, the sweep
screen): Textual's App plus the members of DDTreeApp they use, declared here. They type against this base
instead of importing ui/app.py, which imports them, so there is no import cycle, not even an annotation-only
one (scripts/check_cycles.py counts those). DDTreeApp (ui/app.py) is the one subclass and defines each."""

from __future__ import annotations

from typing import Protocol

from textual.app import App

from ddtree_tui.model.snapshot import FleetSnapshot
from ddtree_tui.ui.backend import FleetLike
from ddtree_tui.ui.controller import Controller


class BenchOpener(Protocol):
    """The bench dialog, as a service action opens it (ui/bench_actions.py BenchActions)."""

    def open(self, preselect: list[str]) -> None: ...
    def open_ready(self) -> None: ...
    @property
    def running(self) -> bool: ...
    def stop(self) -> bool: ...


class AppHost(App[int]):
    """What the action modules may use of the app (abstract here; DDTreeApp defines them)."""

    fleet: FleetLike
    ctl: Controller
    bench: BenchOpener

    @property
    def selected_service(self) -> str | None:
        raise NotImplementedError

    def current_snapshot(self) -> FleetSnapshot:
        raise NotImplementedError

    def pane_titles(self) -> dict[int, str]:
        raise NotImplementedError

    def flush(self, force: bool = False) -> None:
        raise NotImplementedError

    def select_host(self, host: str | None) -> None:
        raise NotImplementedError

    def request_service(self, verb: str, ref: str, to_host: str | None = None) -> None:
        raise NotImplementedError

    def open_doctor(self, host: str) -> None:
        raise NotImplementedError

    def read_only_reason(self) -> str | None:
        raise NotImplementedError

    def theme_names(self) -> list[str]:
        raise NotImplementedError

    def set_theme_name(self, name: str) -> None:
        raise NotImplementedError

    def action_focus_pane(self, n: int) -> None:
        raise NotImplementedError

    def action_bench(self) -> None:
        raise NotImplementedError

    def action_new_todo(self) -> None:
        raise NotImplementedError

    def action_reload_profiles(self) -> None:
        raise NotImplementedError

    def action_help(self) -> None:
        raise NotImplementedError

"""`D`: the preflight checks of one host (the same as `ddtree-tui doctor HOST`), as a table of findings with
the fix beside anything that is not ok. The checks run in a worker; a host that is down is a message here,
never an exception."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

if TYPE_CHECKING:  # the doctor package (and the telemetry it imports) loads when a doctor runs (issue 28)
    from ddtree_tui.doctor import DoctorReport

MARK = {"ok": "ok", "warn": "WARN", "fail": "FAIL"}
BADGE = {"ok": "ok", "warn": "warn", "fail": "bad"}


class DoctorScreen(ModalScreen[None]):
    COMPONENT_CLASSES = {"badge--ok", "badge--warn", "badge--bad", "badge--dim"}
    DEFAULT_CSS = """
    DoctorScreen { align: center middle; }
    DoctorScreen > #dialog { width: 95%; max-width: 140; height: 90%; border: thick $accent;
        background: $surface; padding: 0 1; }
    DoctorScreen #doctor-title { width: 100%; text-style: bold; }
    DoctorScreen #doctor-status { width: 100%; color: $text-muted; }
    DoctorScreen #doctor-scroll { height: 1fr; }
    DoctorScreen > .badge--ok { color: green; text-style: bold; }
    DoctorScreen > .badge--warn { color: yellow; text-style: bold; }
    DoctorScreen > .badge--bad { color: red; text-style: bold; }
    DoctorScreen > .badge--dim { color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape,q", "close", "Close doctor"),
        Binding("r", "rerun", "Run the checks again"),
    ]

    def __init__(self, host: str, run: Callable[[str], Awaitable[DoctorReport]]) -> None:
        """run: the fleet's `doctor(host)`, returning a DoctorReport."""
        super().__init__()
        self.host = host
        self._run = run
        self.report: DoctorReport | None = None
        self.error: str | None = None
        self.running = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"doctor {self.host}", id="doctor-title")
            yield Label("", id="doctor-status")
            with VerticalScroll(id="doctor-scroll"):
                yield Static("", id="doctor-findings")

    def on_mount(self) -> None:
        self.query_one("#doctor-scroll").focus()
        self.action_rerun()

    def action_rerun(self) -> None:
        if self.running:
            return
        self.running = True
        self.report, self.error = None, None
        self._show()
        self.run_worker(self._check(), group="doctor", exclusive=True, name=f"doctor {self.host}")

    async def _check(self) -> None:
        try:
            self.report = await self._run(self.host)
        except Exception as e:  # a host that is down, a profile error: shown, never raised
            self.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        finally:
            self.running = False
        self._show()

    def _style(self, badge: str) -> Any:
        try:
            return self.get_component_rich_style(f"badge--{badge}", partial=True)
        except Exception:
            return ""

    def _show(self) -> None:
        title = self.query_one("#doctor-title", Label)
        status = self.query_one("#doctor-status", Label)
        body = self.query_one("#doctor-findings", Static)
        if self.running:
            title.update(f"doctor {self.host}")
            status.update(f"running checks on {self.host}… (Esc closes)")
            body.update("")
            return
        if self.error is not None:
            title.update(f"doctor {self.host}: the checks did not run")
            status.update("r runs them again · Esc closes")
            body.update(Text(self.error, style=self._style("bad")))
            return
        from ddtree_tui.doctor import collapse_unneeded  # the doctor ran: its package is loaded

        rep = self.report
        findings = collapse_unneeded(list(rep.findings) if rep else [])
        n = {s: sum(1 for f in findings if f.status == s) for s in ("ok", "warn", "fail")}
        addr = (rep.address if rep else "") or ""
        title.update(
            f"doctor {self.host}"
            + (f" ({addr})" if addr else "")
            + f": {n['ok']} ok, {n['warn']} warn, {n['fail']} fail"
        )
        status.update("r runs the checks again · Esc closes")
        table = Table(expand=True, box=None, show_edge=False, pad_edge=False, header_style="bold")
        table.add_column("", no_wrap=True, width=4)
        table.add_column("Check", no_wrap=True)
        table.add_column("Evidence", ratio=3, overflow="fold")
        table.add_column("Fix", ratio=2, overflow="fold")
        for f in findings:
            badge = BADGE.get(f.status, "dim")
            fix = f.fix if f.fix and f.status != "ok" else ""
            table.add_row(
                Text(MARK.get(f.status, f.status), style=self._style(badge)),
                f.check,
                f.evidence,
                fix,
            )
        body.update(table if findings else Text("no findings", style=self._style("dim")))

    def action_close(self) -> None:
        self.dismiss(None)

"""The app's service actions: launch, kill, restart and move (confirmed first; a move picks its host), the
log pane, a bench and a smoke request for one service. Every key, palette entry and ServiceRequest ends in
`request`; a confirmed change is posted as a ServiceIntent carrying the typed intent (model/intents.py), and
the controller carries it to `fleet.do` in a worker. Kept out of ui/app.py so the view stays a layout and its
keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtree_tui.model.intents import Kill, Launch, Move, Restart
from ddtree_tui.model.intents import ServiceIntent as Intent
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.ui.messages import ServiceIntent
from ddtree_tui.ui.screens.confirm import ConfirmScreen
from ddtree_tui.ui.screens.move import MoveScreen
from ddtree_tui.ui.widgets.services import ServicesPane

if TYPE_CHECKING:
    from ddtree_tui.ui.apphost import AppHost


class ServiceActions:
    """What the app does when the user acts on one service (HOST/SVC)."""

    def __init__(self, app: AppHost) -> None:
        self.app = app

    def post(self, intent: Intent) -> None:
        self.app.post_message(ServiceIntent(intent))

    def request(self, verb: str, ref: str, to_host: str | None = None) -> None:
        """Launch at once; kill, restart and move after a confirm; logs, bench and smoke."""
        app = self.app
        sref = ServiceRef.parse(ref)  # a row's key: HOST/SVC
        if verb == "launch":
            self.post(Launch(ref=sref))
        elif verb in ("kill", "restart"):
            label = "Kill" if verb == "kill" else "Restart"
            detail = (
                "The process is stopped (SIGTERM, then SIGKILL after the kill timeout)."
                if verb == "kill"
                else "Kill, then launch again with the same spec (redeploy)."
            )
            app.push_screen(
                ConfirmScreen(f"{label} {ref}?", detail, label),
                lambda ok: (
                    self.post(Kill(ref=sref) if verb == "kill" else Restart(ref=sref))
                    if ok
                    else app.notify(f"{verb} {ref}: cancelled")
                ),
            )
        elif verb == "move":
            if to_host is None:
                here = ref.split("/", 1)[0]
                others = [(h.name, h.state) for h in app.ctl.snap.hosts if h.name != here]
                if not others:
                    app.notify("there is no other host to move to", severity="warning")
                    return
                down = [n for n, st in others if st != "connected"]
                if len(down) == len(others):  # refused now, not after a confirm
                    app.notify(
                        f"no connected host to move to ({', '.join(down)}: not connected)", severity="warning"
                    )
                    return

                def chosen(dest: str | None) -> None:
                    if dest:
                        self.request("move", ref, dest)

                app.push_screen(MoveScreen(ref, others), chosen)
                return
            dest = to_host
            app.push_screen(
                ConfirmScreen(
                    f"Move {ref} to {to_host}?",
                    f"Launch the same spec on {to_host}, wait until it is ready, then kill it here.",
                    "Move",
                ),
                lambda ok: self.post(Move(ref=sref, to_host=dest)) if ok else app.notify("move: cancelled"),
            )
        elif verb == "logs":
            app.ctl.select_service(ref)
            app.query_one(ServicesPane).select_ref(ref)
            app.ctl.dirty.add("logs")
            app.action_focus_pane(6)
        elif verb == "bench":
            app.bench.open([ref])
        elif verb == "smoke":
            app.ctl.smoke(ref)

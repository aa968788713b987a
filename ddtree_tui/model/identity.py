"""Target identity: what a bench, smoke, sweep point or load level saw behind a service's port before it
measured anything (issue 29). A figure is only as true as the name it is filed under: a foreign process that
happens to hold a stopped service's port must never produce a number under that service's name.

One shape for every kind of target, recorded per target in each run's JSON (`TargetInfo.identity`), and read
by the todo evidence (only a run whose identity was verified counts):

- `launched`: a service ddtree-tui starts. Verified when the port's listener is in the process group of the
  pidfile's process, and that process is ours (start time, uid, argv: what kill believes).
- `external`: a service the profile says runs already. Its own /server_info (model, version, speculative
  algorithm) is recorded; verified when it answered. A change against the previous run is in `changed`.
- `url`: a `--url` server. Recorded the same way.

`forced` marks a run measured with `--force` although the check failed: it is recorded as such and never
verified.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

IdentityKind = Literal["launched", "external", "url"]
# ours: the listener is our launched process group; server: the server told us who it is (external / url);
# stopped: nothing of ours runs and nothing listens; foreign: something else holds the port; no-listener: our
# process runs but nothing listens yet; unknown: the check itself failed (host unreachable, no reply)
Verdict = Literal["ours", "server", "stopped", "foreign", "no-listener", "unknown"]


class TargetIdentity(BaseModel):
    """Who answered on a target's port when the run checked, and whether that is the service we mean."""

    model_config = ConfigDict(frozen=True)

    ref: str
    kind: IdentityKind
    verdict: Verdict
    verified: bool = False  # the listener is the service named (never when forced)
    forced: bool = False  # measured with --force although not verified
    reason: str | None = None  # why not verified, in words (also the refusal's text)
    port: int | None = None
    service_pid: int | None = None  # the pidfile's process (launched services)
    listener_pids: list[int] | None = None  # who holds the listening socket, where we may see it
    listener_program: str | None = (
        None  # a foreign holder's program name (no arguments: they may hold secrets)
    )
    model: str | None = None  # /server_info's model_path
    version: str | None = None  # /server_info's version
    speculative_algorithm: str | None = None
    checked_at: float | None = None  # unix time of the check
    changed: str | None = None  # what differs from the previous run's identity of the same target

    def refusal(self) -> str | None:
        """The words refusing a measurement of this target without --force; None when it may be measured.
        Only a launched service is refused: an external or --url server is ours to measure, not to own, so
        what it said of itself is recorded instead."""
        if self.verified or self.kind != "launched":
            return None
        return f"refused to measure {self.ref}: {self.reason or self.verdict}"


__all__ = ["IdentityKind", "TargetIdentity", "Verdict"]

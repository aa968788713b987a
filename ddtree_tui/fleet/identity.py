"""Target identity for the fleet's desks (issue 29): before a bench, smoke, sweep point or load level talks to
a service, who is behind its port?

- a service we launch: the host program remote/listener.py (services/identity.py) says whether the port's
  listener is our launched process group; a stopped or foreign-held service is refused with the reason
  unless the request says `force` (then recorded as forced, never verified);
- an `external` service or a `--url` server: what its own /server_info says (model, version, speculative
  algorithm) is recorded, and `changed` says what differs from the previous run's identity of the target.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ddtree_tui.bench.client import server_info
from ddtree_tui.bench.stream import StreamClient
from ddtree_tui.model.identity import IdentityKind, TargetIdentity

FORCE_HINT = "--force measures it anyway, recorded as forced"
_COMPARED = (("model", "model"), ("version", "version"), ("speculative_algorithm", "speculative algorithm"))


async def served_identity(
    ref: str, base_url: str, kind: IdentityKind, timeout: float = 5.0
) -> TargetIdentity:
    """What the server at `base_url` says it is (/server_info); verified when it answered."""
    async with StreamClient(connect_timeout=timeout) as client:
        info = await server_info(client, base_url, timeout)
    now = time.time()
    if info is None:
        return TargetIdentity(
            ref=ref, kind=kind, verdict="unknown", checked_at=now,
            reason=f"{ref} did not say who it is (no /server_info answer)",
        )  # fmt: skip
    version = info.get("version")
    algo = info.get("speculative_algorithm")
    return TargetIdentity(
        ref=ref,
        kind=kind,
        verdict="server",
        verified=True,
        model=str(info["model_path"]) if info.get("model_path") is not None else None,
        version=str(version) if version is not None else None,
        speculative_algorithm=str(algo) if algo is not None else None,
        checked_at=now,
    )


def forced(ident: TargetIdentity) -> TargetIdentity:
    """The identity of a target measured with --force although the check failed."""
    return ident.model_copy(update={"forced": True, "verified": False})


def changed(prev: TargetIdentity | None, now: TargetIdentity) -> str | None:
    """What the server says differently from the previous run's identity ("version 0.5.19 → 0.5.20"), or None."""
    if prev is None or now.verdict != "server" or prev.verdict != "server":
        return None
    diffs = [
        f"{label} {getattr(prev, key) or '?'} → {getattr(now, key) or '?'}"
        for key, label in _COMPARED
        if getattr(prev, key) != getattr(now, key)
    ]
    return ", ".join(diffs) or None


def stamp(run: object, idents: Sequence[TargetIdentity]) -> None:
    """Record `idents` on the run's targets (by ref), or in its `identities` list (agentic runs)."""
    by_ref = {i.ref: i for i in idents}
    targets = getattr(run, "targets", None)
    if targets is not None:
        run.targets = [  # type: ignore[attr-defined]  # every run kind with targets keeps TargetInfo there
            t.model_copy(update={"identity": by_ref.get(t.ref, t.identity)}) for t in targets
        ]
    elif hasattr(run, "identities"):
        run.identities = list(idents)


__all__ = ["FORCE_HINT", "changed", "forced", "served_identity", "stamp"]

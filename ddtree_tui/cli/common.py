"""What every headless mode does before its work: find the host profiles the user named, pick the host or the
HOST/SVC the mode acts on, and turn a bad choice into one clear line on stderr and exit code 2.

One copy of this preamble, so every mode words a missing profile or an unknown service the same way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import wraps

from ddtree_tui.config import HostProfile, ProfileError, ServiceSpec, find_service, resolve_profiles

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad usage or configuration: printed as one line, exit code 2."""


def err(msg: str, mode: str | None = None) -> None:
    """One line on stderr, prefixed with the program (and the mode) name."""
    prefix = f"ddtree-tui {mode}" if mode else "ddtree-tui"
    print(f"{prefix}: {msg}", file=sys.stderr, flush=True)


def profiles_of(ns: argparse.Namespace, *, required: bool = False) -> list[HostProfile]:
    """The profiles named by --profile / --profiles / --demo (or ./hostprofiles/, or the user's config)."""
    try:
        profiles = resolve_profiles(
            getattr(ns, "profile", None), getattr(ns, "profiles", None), bool(getattr(ns, "demo", False))
        )
    except ProfileError as e:
        raise UsageError(str(e)) from e
    if required and not profiles:
        raise UsageError("no host profiles (use --profile FILE, --profiles DIR, --demo or ./hostprofiles/)")
    return profiles


def hosts_of(ns: argparse.Namespace, host: str | None) -> list[HostProfile]:
    """Every profile, or only the one named `host` (an unknown name lists the known ones)."""
    profiles = profiles_of(ns, required=True)
    if not host:
        return profiles
    sel = [p for p in profiles if p.name == host]
    if not sel:
        known = ", ".join(p.name for p in profiles) or "none"
        raise UsageError(f"no host '{host}' (known: {known})")
    return sel


def service_of(ns: argparse.Namespace, ref: str) -> tuple[list[HostProfile], HostProfile, ServiceSpec]:
    """The profiles and the one HOST/SVC a mode acts on."""
    profiles = profiles_of(ns)
    try:
        host, spec = find_service(profiles, ref)
    except ValueError as e:
        raise UsageError(str(e)) from e
    return profiles, host, spec


def handler(
    mode: str | None = None,
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Wraps a mode handler so a UsageError it raises becomes one stderr line and exit code 2."""

    def wrap(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @wraps(fn)
        def run(ns: argparse.Namespace) -> int:
            try:
                return fn(ns)
            except UsageError as e:
                err(str(e), mode or getattr(ns, "mode", None))
                return EXIT_USAGE

        return run

    return wrap

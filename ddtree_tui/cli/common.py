"""What every headless mode does before its work: find the host profiles the user named, pick the host or the
HOST/SVC the mode acts on, and turn a bad choice into one clear line on stderr and exit code 2.

One copy of this preamble, so every mode words a missing profile or an unknown service the same way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, TypeVar, overload

from pydantic import ValidationError

from ddtree_tui.cli.argbase import CliArgs

if TYPE_CHECKING:  # the profile models are imported where profiles are read: `sim` and `report` read none
    from ddtree_tui.config import HostProfile, ServiceSpec

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
A = TypeVar("A", bound=CliArgs)
Handler = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """Bad usage or configuration: printed as one line, exit code 2."""


def err(msg: str, mode: str | None = None) -> None:
    """One line on stderr, prefixed with the program (and the mode) name."""
    prefix = f"ddtree-tui {mode}" if mode else "ddtree-tui"
    print(f"{prefix}: {msg}", file=sys.stderr, flush=True)


def profiles_of(args: CliArgs | argparse.Namespace, *, required: bool = False) -> list[HostProfile]:
    """The profiles named by --profile / --profiles / --demo (or ./hostprofiles/, or the user's config)."""
    from ddtree_tui.config import ProfileError, resolve_profiles

    a = args if isinstance(args, CliArgs) else CliArgs.of(args)
    try:
        profiles = resolve_profiles(a.profile, a.profiles, a.demo)
    except ProfileError as e:
        raise UsageError(str(e)) from e
    if required and not profiles:
        raise UsageError("no host profiles (use --profile FILE, --profiles DIR, --demo or ./hostprofiles/)")
    return profiles


def hosts_of(ns: CliArgs | argparse.Namespace, host: str | None) -> list[HostProfile]:
    """Every profile, or only the one named `host` (an unknown name lists the known ones)."""
    profiles = profiles_of(ns, required=True)
    if not host:
        return profiles
    sel = [p for p in profiles if p.name == host]
    if not sel:
        known = ", ".join(p.name for p in profiles) or "none"
        raise UsageError(f"no host '{host}' (known: {known})")
    return sel


def service_of(
    ns: CliArgs | argparse.Namespace, ref: str
) -> tuple[list[HostProfile], HostProfile, ServiceSpec]:
    """The profiles and the one HOST/SVC a mode acts on."""
    from ddtree_tui.config import find_service

    profiles = profiles_of(ns)
    try:
        host, spec = find_service(profiles, ref)
    except ValueError as e:
        raise UsageError(str(e)) from e
    return profiles, host, spec


@overload
def handler(mode: str | None = None) -> Callable[[Handler], Handler]: ...
@overload
def handler(mode: str | None, model: type[A]) -> Callable[[Callable[[A], int]], Handler]: ...


def handler(mode: str | None = None, model: type[CliArgs] | None = None) -> Callable[..., Handler]:
    """Wraps a mode handler so a UsageError it raises becomes one stderr line and exit code 2. With `model`,
    the handler takes the typed arguments (`model.of(ns)`, built once here) instead of the namespace."""

    def wrap(fn: Callable[..., int]) -> Handler:
        @wraps(fn)
        def run(ns: argparse.Namespace) -> int:
            try:
                if model is None:
                    return fn(ns)
                try:
                    args = model.of(ns)
                except ValidationError as e:
                    first = e.errors()[0]
                    where = ".".join(str(x) for x in first["loc"])
                    raise UsageError(f"{where}: {first['msg']}") from None
                return fn(args)
            except UsageError as e:
                err(str(e), mode or getattr(ns, "mode", None))
                return EXIT_USAGE

        return run

    return wrap

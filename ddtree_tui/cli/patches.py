"""`ddtree-tui patches list | status HOST [NAME] | apply HOST NAME | revert HOST NAME`: the patch logic is
services/patches.py, reached through Fleet; this module parses, prints and picks the exit code."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ddtree_tui.cli.args import PatchesArgs
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, UsageError, err, handler, hosts_of
from ddtree_tui.config import HostProfile
from ddtree_tui.fleet import Fleet, TransportError
from ddtree_tui.services.patches import (
    PatchAction,
    PatchError,
    PatchReport,
    PatchSet,
    default_patches_dir,
    list_patch_sets,
)


def _print_report(r: PatchReport) -> None:
    print(r.message)
    if r.package_dir:
        print(f"  package: {r.package_dir}")
    for f in r.files:
        print(f"  {f.state:<12} {f.path}" + (f"  ({f.detail})" if f.detail else ""))


async def _run(action: PatchAction, profile: HostProfile, sets: list[PatchSet]) -> int:
    async with Fleet.open([profile], telemetry=False, auto_complete_todos=False, watch=False) as fleet:
        why = await fleet.reach(profile.name)
        if why is not None:
            err(why, "patches")
            return EXIT_FAIL
        try:
            reports = await fleet.patches(action, profile.name, sets)
        except TransportError as e:
            err(str(e), "patches")
            return EXIT_FAIL
    for r in reports:
        _print_report(r)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAIL


def _chosen(args: PatchesArgs, sets: list[PatchSet], pdir: Path) -> list[PatchSet]:
    if not args.host:
        raise UsageError(f"patches {args.action} needs HOST")
    if args.patch:
        chosen = [ps for ps in sets if ps.name == args.patch]
        if not chosen:
            names = ", ".join(ps.name for ps in sets) or "none"
            raise UsageError(f"no patch set '{args.patch}' in {pdir} (known: {names})")
        return chosen
    if args.action == "status":
        return sets
    raise UsageError(f"patches {args.action} needs HOST NAME")


@handler("patches", PatchesArgs)
def cli_main(args: PatchesArgs) -> int:
    pdir = Path(args.patches_dir) if args.patches_dir else default_patches_dir()
    try:
        sets = list_patch_sets(pdir) if pdir.is_dir() else []
    except PatchError as e:
        raise UsageError(str(e)) from e
    if args.action == "list":
        if not sets:
            print(f"no patch sets in {pdir}")
        for ps in sets:
            m = ps.manifest
            print(f"{ps.name:<28} {m.package} {m.version or '(any version)'}  {m.description}")
        return EXIT_OK
    chosen = _chosen(args, sets, pdir)
    (profile,) = hosts_of(args, args.host)
    return asyncio.run(_run(args.action, profile, chosen))

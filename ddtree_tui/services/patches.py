"""Patch sets for a host's installed SGLang (or any Python package): status, apply with a backup, exact revert.

A patch set is `patches/<name>/manifest.toml` plus unified diffs (see patches/README.md; reading them, the
applier and version ranges are `patchset`, re-exported here). The diffs are applied
by a small pure-Python applier (`patchset`), not by `patch(1)` on the host: GPU hosts and containers often lack
`patch`, and applying locally lets us check every hunk (exact context, no fuzz) before a byte is written.
The host only reads and writes files, through short stdlib Python helpers run with the host's Python. Writes
are atomic; the original of every file is kept in `<workdir>/patches/<name>/backup/`, and revert restores it
byte for byte when the file is still what apply wrote (else it reverse-applies the diff, or reports a conflict).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ddtree_tui.config import HostProfile
from ddtree_tui.remote import source
from ddtree_tui.services.launchline import host_python, workdir
from ddtree_tui.services.patchset import (
    FileDiff,
    FileReport,
    FileState,
    Hunk,
    Manifest,
    PatchAction,
    PatchError,
    PatchReport,
    PatchSet,
    apply_hunks,
    default_patches_dir,
    file_state,
    list_patch_sets,
    load_patch_set,
    parse_diff,
    version_matches,
)
from ddtree_tui.transport import Transport, TransportError

__all__ = [
    "FileDiff",
    "FileReport",
    "FileState",
    "Hunk",
    "Manifest",
    "PatchAction",
    "PatchError",
    "PatchReport",
    "PatchSet",
    "apply_hunks",
    "apply_patch",
    "default_patches_dir",
    "file_state",
    "list_patch_sets",
    "load_patch_set",
    "parse_diff",
    "patch_status",
    "revert_patch",
    "version_matches",
]

# --- host side -----------------------------------------------------------------------------------------------

# the host programs: ddtree_tui/remote/patch_{locate,read,write}.py
_LOCATE = source("patch_locate")
_READ = source("patch_read")
_WRITE = source("patch_write")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def _host_json(t: Transport, profile: HostProfile, argv_tail: Sequence[str], input: str | None) -> Any:
    res = await t.run(
        [host_python(profile), "-c", *argv_tail], input=input, env=profile.env or None, timeout=60
    )
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise TransportError(
            f"helper failed on {profile.name}: {(res.stderr or res.stdout).strip()[-400:] or 'no output'}"
        ) from None


class _Located(BaseModel):
    package_dir: str
    version: str | None
    version_ok: bool
    state_dir: str


async def _locate(t: Transport, profile: HostProfile, ps: PatchSet) -> _Located | PatchReport:
    m = ps.manifest
    req = {"package": m.package, "distribution": m.distribution or m.package}
    info = await _host_json(t, profile, [_LOCATE], json.dumps(req))
    if not info.get("dir"):
        why = info.get("error") or f"{host_python(profile)} cannot import {m.package}"
        return PatchReport(
            name=ps.name, host=profile.name, ok=False, message=f"package {m.package} not found: {why}"
        )
    version = info.get("version")
    vok = version_matches(version, m.version) if version else not m.version
    state_dir = posixpath.join(workdir(profile), "patches", ps.name)
    return _Located(package_dir=info["dir"], version=version, version_ok=vok, state_dir=state_dir)


async def _read(t: Transport, profile: HostProfile, paths: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = await _host_json(t, profile, [_READ], json.dumps(paths))
    return found


def _nothing_to_write(
    ps: PatchSet,
    profile: HostProfile,
    loc: _Located,
    files: list[FileReport],
    writes: bool,
    *,
    reverting: bool,
) -> PatchReport | None:
    """The report when nothing is to be written, else None. All or nothing: one conflicting or missing file
    refuses the whole set, naming every such file; no file to change is success (applied / not applied)."""
    bad = [f for f in files if f.state in ("conflict", "missing")]
    if bad:
        what = f"cannot revert {ps.name}" if reverting else f"{ps.name} does not apply"
        detail = ", ".join(f"{f.path} {f.state}" for f in bad)
        return _report(
            ps, profile, loc, False, f"{what} on {profile.name}: {detail}; nothing was written", files
        )
    if writes:
        return None
    state = "not applied" if reverting else "already applied"
    return _report(ps, profile, loc, True, f"{ps.name} is {state} on {profile.name}", files)


def _report(
    ps: PatchSet, profile: HostProfile, loc: _Located, ok: bool, msg: str, files: list[FileReport]
) -> PatchReport:
    return PatchReport(name=ps.name, host=profile.name, package_dir=loc.package_dir, version=loc.version,
                       version_ok=loc.version_ok, ok=ok, message=msg, files=files)  # fmt: skip


async def patch_status(t: Transport, profile: HostProfile, ps: PatchSet) -> PatchReport:
    """Per file: applied / not applied / conflict / missing."""
    loc = await _locate(t, profile, ps)
    if isinstance(loc, PatchReport):
        return loc
    paths = [posixpath.join(loc.package_dir, d.path) for d in ps.diffs]
    texts = await _read(t, profile, paths)
    files = [
        FileReport(path=d.path, state=file_state(texts.get(p), d))
        for d, p in zip(ps.diffs, paths, strict=True)
    ]
    states = {f.state for f in files}
    overall = states.pop() if len(states) == 1 else "partly applied"
    ok = not any(f.state in ("conflict", "missing") for f in files)
    ver = f"{ps.manifest.package} {loc.version or '?'}"
    if not loc.version_ok:
        ver += f" (patch set is for {ps.manifest.version})"
    return _report(ps, profile, loc, ok, f"{ps.name} on {profile.name}: {overall} ({ver})", files)


async def apply_patch(t: Transport, profile: HostProfile, ps: PatchSet, force: bool = False) -> PatchReport:
    """Dry-run every hunk first; write nothing unless every file applies (or is already applied)."""
    loc = await _locate(t, profile, ps)
    if isinstance(loc, PatchReport):
        return loc
    if not loc.version_ok and not force:
        return _report(ps, profile, loc, False,
                       f"{ps.manifest.package} {loc.version or '(unknown version)'} on {profile.name} is outside "
                       f"{ps.manifest.version!r}; not applied", [])  # fmt: skip
    paths = [posixpath.join(loc.package_dir, d.path) for d in ps.diffs]
    texts = await _read(t, profile, paths)
    files: list[FileReport] = []
    writes: list[dict[str, str]] = []
    backups: list[dict[str, str]] = []
    state_files: dict[str, dict[str, str]] = {}
    for d, p in zip(ps.diffs, paths, strict=True):
        text = texts.get(p)
        st = file_state(text, d)
        if st == "not applied" and text is not None:
            new = apply_hunks(text, d)
            assert new is not None
            writes.append({"path": p, "text": new})
            backups.append({"to": posixpath.join(loc.state_dir, "backup", d.path), "text": text})
            state_files[d.path] = {"sha_before": _sha(text), "sha_after": _sha(new)}
            files.append(FileReport(path=d.path, state="patched"))
        else:
            files.append(FileReport(path=d.path, state=st))
    settled = _nothing_to_write(ps, profile, loc, files, bool(writes), reverting=False)
    if settled is not None:
        return settled
    state_path = posixpath.join(loc.state_dir, "state.json")
    old_state = (await _read(t, profile, [state_path])).get(state_path)
    prev = json.loads(old_state) if old_state else {}
    state = {"name": ps.name, "package_dir": loc.package_dir, "version": loc.version, "applied_at": time.time(),
             "files": {**prev.get("files", {}), **state_files}}  # fmt: skip
    await _host_json(t, profile, [_WRITE],
                     json.dumps({"writes": writes, "backups": backups, "state_path": state_path, "state": state}))  # fmt: skip
    return _report(
        ps, profile, loc, True, f"applied {ps.name} on {profile.name} ({len(writes)} file(s))", files
    )


async def revert_patch(t: Transport, profile: HostProfile, ps: PatchSet) -> PatchReport:
    """Restore the backup byte for byte when the file is still what apply wrote; else reverse-apply the diff;
    a file changed since in the patched region is a conflict (nothing is written then)."""
    loc = await _locate(t, profile, ps)
    if isinstance(loc, PatchReport):
        return loc
    paths = [posixpath.join(loc.package_dir, d.path) for d in ps.diffs]
    state_path = posixpath.join(loc.state_dir, "state.json")
    backup_paths = [posixpath.join(loc.state_dir, "backup", d.path) for d in ps.diffs]
    texts = await _read(t, profile, [*paths, *backup_paths, state_path])
    raw_state = texts.get(state_path)
    state = json.loads(raw_state) if raw_state else {"files": {}}
    files: list[FileReport] = []
    writes: list[dict[str, str]] = []
    for d, p, bp in zip(ps.diffs, paths, backup_paths, strict=True):
        text = texts.get(p)
        rec = state.get("files", {}).get(d.path)
        backup = texts.get(bp)
        st = file_state(text, d)
        if (
            text is not None
            and rec
            and backup is not None
            and _sha(text) == rec["sha_after"]
            and _sha(backup) == rec["sha_before"]
        ):
            writes.append({"path": p, "text": backup})
            files.append(FileReport(path=d.path, state="reverted", detail="restored from backup"))
        elif st == "applied" and text is not None:
            new = apply_hunks(text, d, reverse=True)
            assert new is not None
            writes.append({"path": p, "text": new})
            files.append(
                FileReport(path=d.path, state="reverted", detail="reverse-applied (no matching backup)")
            )
        else:
            files.append(FileReport(path=d.path, state=st))
    settled = _nothing_to_write(ps, profile, loc, files, bool(writes), reverting=True)
    if settled is not None:
        return settled
    await _host_json(
        t, profile, [_WRITE], json.dumps({"writes": writes, "state_path": state_path, "state": None})
    )
    return _report(
        ps, profile, loc, True, f"reverted {ps.name} on {profile.name} ({len(writes)} file(s))", files
    )

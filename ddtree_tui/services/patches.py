"""Patch sets for a host's installed SGLang (or any Python package): status, apply with a backup, exact revert.

A patch set is `patches/<name>/manifest.toml` plus unified diffs (see patches/README.md). The diffs are applied
by a small pure-Python applier here, not by `patch(1)` on the host: GPU hosts and containers often lack
`patch`, and applying locally lets us check every hunk (exact context, no fuzz) before a byte is written.
The host only reads and writes files, through short stdlib Python helpers run with the host's Python. Writes
are atomic; the original of every file is kept in `<workdir>/patches/<name>/backup/`, and revert restores it
byte for byte when the file is still what apply wrote (else it reverse-applies the diff, or reports a conflict).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ddtree_tui.config import HostProfile
from ddtree_tui.remote import source
from ddtree_tui.services.launchline import host_python, workdir
from ddtree_tui.transport import Transport, TransportError

FileState = Literal["applied", "not applied", "conflict", "missing"]
PatchAction = Literal["status", "apply", "revert"]


class PatchError(Exception):
    """A patch set that cannot be read or used (bad manifest, unparsable diff)."""


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    package: str  # import name, located on the host with importlib
    distribution: str | None = None  # distribution name for the version, when it differs from `package`
    version: str = ""  # e.g. ">=0.5.23,<0.5.24"; empty = any
    description: str = ""
    files: list[str] = Field(min_length=1)  # diff files, relative to the patch set's directory


class Hunk(BaseModel):
    model_config = ConfigDict(frozen=True)

    old_start: int
    old: list[str]  # lines with their newline
    new: list[str]


class FileDiff(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str  # relative to the package directory
    hunks: list[Hunk]


class PatchSet(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    directory: str
    manifest: Manifest
    diffs: list[FileDiff]


class FileReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    state: FileState | Literal["reverted", "patched"]
    detail: str | None = None


class PatchReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    host: str
    package_dir: str | None = None
    version: str | None = None
    version_ok: bool = True
    ok: bool
    message: str
    files: list[FileReport] = Field(default_factory=list)


# --- unified diffs -----------------------------------------------------------------------------------------

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _strip1(path: str) -> str:
    path = path.split("\t", 1)[0].strip()
    return path.split("/", 1)[1] if "/" in path else path


def parse_diff(text: str, source: str = "<diff>") -> list[FileDiff]:
    """Parse a unified diff (a/ b/ prefixes, stripped like `patch -p1`)."""
    lines = text.splitlines(keepends=True)
    out: list[FileDiff] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            path = _strip1(lines[i + 1][4:])
            if path == "dev/null" or lines[i + 1][4:].startswith("/dev/null"):
                raise PatchError(f"{source}: deleting files is not supported")
            i += 2
            hunks: list[Hunk] = []
            while i < len(lines) and lines[i].startswith("@@"):
                m = _HUNK_RE.match(lines[i])
                if not m:
                    raise PatchError(f"{source}:{i + 1}: bad hunk header")
                old_n = int(m.group(2)) if m.group(2) is not None else 1
                new_n = int(m.group(4)) if m.group(4) is not None else 1
                old: list[str] = []
                new: list[str] = []
                i += 1
                while i < len(lines) and (len(old) < old_n or len(new) < new_n):
                    ln = lines[i]
                    tag, body = ln[:1], ln[1:]
                    if not body.endswith("\n"):
                        body += "\n"
                    if i + 1 < len(lines) and lines[i + 1].startswith("\\"):
                        body = body[:-1]  # "\ No newline at end of file"
                    if tag == " ":
                        old.append(body)
                        new.append(body)
                    elif tag == "-":
                        old.append(body)
                    elif tag == "+":
                        new.append(body)
                    elif ln in ("\n", "\r\n"):  # an empty context line whose space was stripped
                        old.append("\n")
                        new.append("\n")
                    else:
                        raise PatchError(f"{source}:{i + 1}: unexpected line in hunk: {ln[:40]!r}")
                    i += 1
                    if i < len(lines) and lines[i].startswith("\\"):
                        i += 1
                if len(old) != old_n or len(new) != new_n:
                    raise PatchError(f"{source}: hunk line counts do not match its header")
                hunks.append(Hunk(old_start=int(m.group(1)), old=old, new=new))
            if not hunks:
                raise PatchError(f"{source}: no hunks for {path}")
            out.append(FileDiff(path=path, hunks=hunks))
        else:
            i += 1
    if not out:
        raise PatchError(f"{source}: no file diffs found")
    return out


def _find(lines: list[str], block: list[str], near: int, lo: int) -> int | None:
    """Index where block occurs exactly in lines at or after lo, nearest to near."""
    n = len(block)
    if n == 0:
        return max(lo, min(near, len(lines)))
    cands = range(lo, len(lines) - n + 1)
    best: int | None = None
    for j in sorted(cands, key=lambda k: abs(k - near)):
        if lines[j : j + n] == block:
            best = j
            break
    return best


def apply_hunks(text: str, diff: FileDiff, reverse: bool = False) -> str | None:
    """The text with every hunk applied (or un-applied), or None when a hunk's context is not found."""
    lines = text.splitlines(keepends=True)
    offset = 0
    lo = 0
    for h in diff.hunks:
        old, new = (h.new, h.old) if reverse else (h.old, h.new)
        near = max(0, h.old_start - 1 + offset)
        j = _find(lines, old, near, lo)
        if j is None:
            return None
        lines[j : j + len(old)] = new
        offset += len(new) - len(old)
        lo = j + len(new)
    return "".join(lines)


def file_state(text: str | None, diff: FileDiff) -> FileState:
    if text is None:
        return "missing"
    if apply_hunks(text, diff, reverse=True) is not None and apply_hunks(text, diff) is None:
        return "applied"
    if apply_hunks(text, diff) is not None:
        return "not applied"
    return "conflict"


# --- patch sets on disk ------------------------------------------------------------------------------------


def default_patches_dir() -> Path:
    cwd = Path.cwd() / "patches"
    if cwd.is_dir():
        return cwd
    return Path(__file__).resolve().parents[2] / "patches"


def load_patch_set(directory: Path | str) -> PatchSet:
    d = Path(directory)
    mf = d / "manifest.toml"
    try:
        data = tomllib.loads(mf.read_text(encoding="utf-8"))
        manifest = Manifest.model_validate(data)
    except FileNotFoundError:
        raise PatchError(f"{mf}: missing") from None
    except tomllib.TOMLDecodeError as e:
        raise PatchError(f"{mf}: invalid TOML: {e}") from None
    except ValidationError as e:
        err = e.errors()[0]
        raise PatchError(f"{mf}: field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from None
    diffs: list[FileDiff] = []
    for f in manifest.files:
        p = d / f
        try:
            diffs.extend(parse_diff(p.read_text(encoding="utf-8"), str(p)))
        except FileNotFoundError:
            raise PatchError(f"{mf}: listed diff {f} does not exist") from None
    for fd in diffs:
        if fd.path.startswith("/") or ".." in fd.path.split("/"):
            raise PatchError(f"{d}: diff path {fd.path!r} leaves the package directory")
    return PatchSet(name=manifest.name or d.name, directory=str(d), manifest=manifest, diffs=diffs)


def list_patch_sets(patches_dir: Path | str) -> list[PatchSet]:
    root = Path(patches_dir)
    return [load_patch_set(p.parent) for p in sorted(root.glob("*/manifest.toml"))]


# --- versions ------------------------------------------------------------------------------------------------


def _vkey(v: str) -> tuple[int, ...]:
    parts = []
    for piece in re.split(r"[.+-]", v.strip()):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def version_matches(version: str, spec: str) -> bool:
    """A small PEP 440 subset: comma-joined clauses of ==, !=, >=, <=, >, < over release numbers."""
    if not spec.strip():
        return True
    v = _vkey(version)
    for clause in spec.split(","):
        m = re.match(r"\s*(==|!=|>=|<=|>|<|~=)\s*([0-9][0-9A-Za-z.+-]*)\s*$", clause)
        if not m:
            raise PatchError(f"version range clause {clause!r} is not understood")
        op, w = m.group(1), _vkey(m.group(2))
        ok = {
            "==": v == w,
            "!=": v != w,
            ">=": v >= w,
            "<=": v <= w,
            ">": v > w,
            "<": v < w,
            "~=": v >= w and v[: max(1, len(w) - 1)] == w[: max(1, len(w) - 1)],
        }[op]
        if not ok:
            return False
    return True


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

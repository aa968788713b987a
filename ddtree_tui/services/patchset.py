"""Patch sets as files: the manifest, the unified diffs, a strict local applier, and version ranges.

A patch set is `patches/<name>/manifest.toml` plus unified diffs (see patches/README.md). Everything here is
pure (no host, no transport): `patches` reads the host's files, applies with these functions locally so every
hunk is checked (exact context, no fuzz) before a byte is written, and writes back atomically.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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

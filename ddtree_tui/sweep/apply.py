"""`ddtree-tui sweep apply DIR [--point N]`: write a point's settings into the host profile, keeping every
comment and the layout (tomlkit edits the document in place), after showing the diff. The new text is parsed
and validated by the profile model before it replaces the file, atomically; a special file is never
replaced."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
from tomlkit.items import AoT, Table

from ddtree_tui.atomicio import resolve_trusted
from ddtree_tui.config import parse_profile
from ddtree_tui.sweep.spec import SweepError, _flag, _set_flag, _typed, apply_overrides, check_key
from ddtree_tui.sweep.state import atomic_write


def _service_table(doc: Any, name: str, path: Path) -> Any:
    services = doc.get("service")
    if services is None:
        raise SweepError(f"{path}: no [[service]] tables")
    for t in services:
        if t.get("name") == name:
            return t
    raise SweepError(f"{path}: no [[service]] named '{name}'")


def _set_nested(table: Any, key: str, value: Any) -> None:
    if key in table:
        table[key] = value
    else:
        table.add(key, value)


def edit_profile_text(text: str, path: Path, service: str, overrides: dict[str, str]) -> str:
    """The profile's text with `overrides` written into the service's table (comments kept)."""
    prof = parse_profile(text, path)  # a file that is not a profile: ProfileError naming it, nothing parsed
    try:
        doc = tomlkit.parse(text)
    except (tomlkit.exceptions.TOMLKitError, ValueError, RecursionError) as e:
        raise SweepError(f"{path}: not a TOML profile tomlkit can edit: {e}") from None
    spec = prof.get_service(service)
    if spec is None:
        raise SweepError(f"{path}: no [[service]] named '{service}'")
    new_spec = apply_overrides(spec, overrides)  # validates every value
    t = _service_table(doc, service, path)
    for key, raw in overrides.items():
        check_key(key)
        if key.startswith("env."):
            env = t.get("env")
            if env is None:
                env = tomlkit.table()
                t.append("env", env)
            _set_nested(env, key[4:], raw)
        elif key.startswith("--") or key.startswith("args."):
            args = [str(a) for a in (t.get("extra_args") or [])]
            new = _set_flag(args, _flag(key), raw)
            arr = tomlkit.array()
            arr.extend(new)
            _set_nested(t, "extra_args", arr)
        elif "." in key:
            top, sub = key.split(".", 1)
            sub_t = t.get(top)
            if sub_t is None:
                sub_t = tomlkit.table()
                t.append(top, sub_t)
            _set_nested(sub_t, sub, getattr(getattr(new_spec, top), sub))
        else:
            v = getattr(new_spec, key)
            if v is None:
                if key in t:
                    del t[key]
            else:
                _set_nested(t, key, v if not isinstance(v, str) else _typed_str(raw, v))
    out = tomlkit.dumps(doc)
    parse_profile(out, path)  # the result must still be a valid profile
    return out


def _typed_str(raw: str, v: str) -> str:
    t = _typed(raw)
    return v if not isinstance(t, str) else t


def diff(old: str, new: str, path: Path) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), fromfile=str(path), tofile=f"{path} (applied)"
        )
    )


def write_profile(path: Path, text: str) -> None:
    """Atomic replace; refuses anything but a regular file (a symlink is followed to its target when we own
    it; one another user planted is refused: atomicio.resolve_trusted)."""
    real = Path(resolve_trusted(path))
    if not real.is_file():
        raise SweepError(f"{path}: not a regular file; not replaced")
    atomic_write(real, text)


# re-exported for the type checker of callers
__all__ = ["AoT", "Table", "diff", "edit_profile_text", "write_profile"]

"""`ddtree-tui sweep apply DIR [--point N]`: write a point's settings into the host profile, keeping every
comment and the layout (tomlkit edits the document in place), after showing the diff. `--schedule` writes
the schedule instead: one service per band (`SERVICE-c1-4`, a copy of the swept service with a free port and
the band's settings), added after the last `[[service]]` or updated in place when it exists. The new text is parsed
and validated by the profile model before it replaces the file, atomically; a special file is never
replaced."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
from pydantic import BaseModel, Field
from tomlkit.items import AoT, Table

from ddtree_tui.atomicio import resolve_trusted
from ddtree_tui.config import ServiceSpec, parse_profile
from ddtree_tui.sweep.schedule import Band
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
__all__ = ["AoT", "Table", "diff", "edit_profile_schedule", "edit_profile_text", "write_profile"]


# --- a schedule: one profile service per band ----------------------------------------------------------

_HEADER_RE = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")


class BandService(BaseModel):
    """What `sweep apply --schedule` does for one band of the schedule."""

    band: str  # c1-4
    service: str | None = None  # the profile service it writes (None: nothing written for this band)
    created: bool = False  # a new [[service]] (else an existing one of that name was updated)
    port: int | None = None
    overrides: dict[str, str] = Field(default_factory=dict)
    note: str = ""


def band_service_name(service: str, band: str) -> str:
    return f"{service}-{band}"


def _header(line: str) -> str | None:
    m = _HEADER_RE.match(line)
    return m.group(2).strip() if m else None


def _services_end(text: str) -> int:
    """The offset just after the last `[[service]]` table (and its `[service.x]` sub-tables), before the
    comments and blank lines that open whatever follows: where a new service joins the array of tables."""
    lines = text.splitlines(keepends=True)
    heads = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("[[") and _header(ln) == "service"]
    if not heads:
        return len(text)
    end = len(lines)
    for j in range(heads[-1] + 1, len(lines)):
        h = _header(lines[j])
        if h is not None and h != "service" and not h.startswith("service."):
            end = j
            break
    k = end
    while k > heads[-1] + 1 and (not lines[k - 1].strip() or lines[k - 1].lstrip().startswith("#")):
        k -= 1
    return sum(len(ln) for ln in lines[:k])


def _new_service_text(
    base: Any, spec: ServiceSpec, overrides: dict[str, str], name: str, port: int, comment: str
) -> str:
    """A `[[service]]` table: the swept service's values with a new name and port and the band's overrides
    (`spec`: the swept service's spec, validating them), under `comment`."""
    values = dict(base.unwrap())
    values["name"], values["port"] = name, port
    new_spec = apply_overrides(spec, overrides)
    for key, raw in overrides.items():
        if key.startswith("env."):
            values["env"] = {**dict(values.get("env") or {}), key[4:]: raw}
        elif key.startswith("--") or key.startswith("args."):
            values["extra_args"] = _set_flag(
                [str(a) for a in values.get("extra_args") or []], _flag(key), raw
            )
        elif "." in key:
            top, sub = key.split(".", 1)
            values[top] = {**dict(values.get(top) or {}), sub: getattr(getattr(new_spec, top), sub)}
        elif getattr(new_spec, key) is None:
            values.pop(key, None)
        else:
            values[key] = getattr(new_spec, key)
    table = tomlkit.table()
    for k, v in values.items():
        table.add(k, v)
    aot = tomlkit.aot()
    aot.append(table)
    frag = tomlkit.document()
    frag.add(tomlkit.comment(comment))
    frag.add("service", aot)
    return tomlkit.dumps(frag)


def edit_profile_schedule(
    text: str, path: Path, service: str, bands: Sequence[Band], sweep_id: str
) -> tuple[str, list[BandService]]:
    """The profile's text with one service per band that has a setting: `SERVICE-cLO-HI`, a copy of the swept
    service with the band's overrides; an existing service of that name is updated in place (applying the
    same schedule twice changes nothing). Every comment and the layout are kept; the result is validated."""
    prof = parse_profile(text, path)  # a bad profile: ProfileError naming file, line and field
    base_spec = prof.get_service(service)
    if base_spec is None:
        raise SweepError(f"{path}: no [[service]] named '{service}'")
    done: list[BandService] = []
    used = {s.port for s in prof.services}
    out = text
    for b in bands:
        if b.overrides is None:
            why = (
                "run the baseline here: no setting beats it"
                if b.use_baseline
                else b.note or "no stable setting"
            )
            done.append(BandService(band=b.name, note=why))
            continue
        name = band_service_name(service, b.name)
        current = parse_profile(out, path)
        have = current.get_service(name)
        bs = BandService(band=b.name, service=name, overrides=dict(b.overrides), created=have is None)
        if have is None:
            port = max(used) + 1
            while port in used:
                port += 1
            used.add(port)
            try:
                doc = tomlkit.parse(out)
            except (tomlkit.exceptions.TOMLKitError, ValueError, RecursionError) as e:
                raise SweepError(f"{path}: not a TOML profile tomlkit can edit: {e}") from None
            conf = "" if b.confidence is None else f", confidence {b.confidence:.2f}"
            comment = (
                f"written by `ddtree-tui sweep apply --schedule` (sweep {sweep_id}): band {b.name}, "
                f"concurrency {b.lo}..{b.hi}: {b.label}{conf}"
            )
            table = _service_table(doc, service, path)
            block = _new_service_text(table, base_spec, dict(b.overrides), name, port, comment)
            at = _services_end(out)
            head, tail = out[:at].rstrip("\n"), out[at:]
            out = f"{head}\n\n{block.rstrip(chr(10))}\n" + ("\n" + tail.lstrip("\n") if tail.strip() else "")
            parse_profile(out, path)
            bs.port = port
        else:
            bs.port = have.port
            out = edit_profile_text(out, path, name, dict(b.overrides))
        done.append(bs)
    after = parse_profile(out, path)
    for s in prof.services:  # the services that were there are unchanged, except the bands' own
        if s.name not in {d.service for d in done} and after.get_service(s.name) != s:
            raise SweepError(f"{path}: writing the schedule would change service '{s.name}'; nothing written")
    return out, done

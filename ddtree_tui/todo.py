"""A todowrite-compatible checklist that cannot lie: items may carry evidence the core observes.

The file is `{"todos": [{"content", "priority", "status", ...}], ...}` (a bare list is read too and written
back as a list). Every field this module does not know is kept, on items and at the top level, because other
tools (todowrite, an editor) share the file. Saves are atomic, keep one backup, and merge with an on-disk
version that changed since we read it, so a concurrent edit is never lost. A corrupt file is never replaced:
the store turns read-only and says where the parse failed.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from ddtree_tui.bench.history import DEFAULT_HISTORY
from ddtree_tui.remote import atomicio
from ddtree_tui.state import FleetSnapshot

Priority = Literal["high", "medium", "low"]
Status = Literal["pending", "in_progress", "completed", "cancelled"]
PRIORITIES: tuple[str, ...] = ("high", "medium", "low")
STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed", "cancelled")
DEFAULT_TODOS = Path(".ddtree") / "todos.json"


class TodoError(Exception):
    """A todo operation that cannot be done (read-only store, bad index, bad value)."""


class TodoItem(BaseModel):
    """One checklist item; unknown fields are kept so a round trip through us loses nothing."""

    model_config = ConfigDict(extra="allow")

    content: str
    priority: Priority = "medium"
    status: Status = "pending"
    id: str | None = None
    check: str | None = None

    # identity used by the merge: the id, or the content the item had when it was read
    _key: str | None = PrivateAttr(default=None)

    def to_file_dict(self) -> dict[str, Any]:
        """The item as written: id/check left out when empty and absent from the input."""
        d = self.model_dump(mode="json")
        for opt in ("id", "check"):
            if d.get(opt) is None and opt not in self.model_fields_set:
                d.pop(opt, None)
        return d


# --- the store ------------------------------------------------------------------------------------------

_Sig = tuple[int, int, int]  # inode, mtime_ns, size


def _stat_sig(path: Path) -> _Sig | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _item_offsets(text: str) -> list[int]:
    """Character offsets where each element of the todos array starts, to point errors at a line."""
    m = re.search(r'"todos"\s*:\s*\[', text)
    if m is None:
        m = re.match(r"\s*\[", text)
    if m is None:
        return []
    dec = json.JSONDecoder()
    pos, out = m.end(), []
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        out.append(pos)
        try:
            _, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
    return out


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


class _Parsed(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    items: list[TodoItem]
    extra: dict[str, Any]
    bare_list: bool


def _parse(text: str, path: Path) -> _Parsed:
    """Parse file text; raise TodoError('file:line:col: message') for anything we cannot use."""
    if not text.strip():
        return _Parsed(items=[], extra={}, bare_list=False)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TodoError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    bare = isinstance(data, list)
    if bare:
        raw_items, extra = data, {}
    elif isinstance(data, dict):
        raw_items = data.get("todos", [])
        extra = {k: v for k, v in data.items() if k != "todos"}
    else:
        raise TodoError(f"{path}:1:1: expected an object with a 'todos' list, got {type(data).__name__}")
    if not isinstance(raw_items, list):
        raise TodoError(f"{path}:1:1: 'todos' must be a list, got {type(raw_items).__name__}")
    items: list[TodoItem] = []
    offsets: list[int] | None = None
    for i, raw in enumerate(raw_items):
        try:
            if not isinstance(raw, dict):
                raise TodoError(f"todos[{i}] must be an object, got {type(raw).__name__}")
            items.append(TodoItem.model_validate(raw))
        except (ValidationError, TodoError) as e:
            if offsets is None:
                offsets = _item_offsets(text)
            line, col = _line_col(text, offsets[i]) if i < len(offsets) else (1, 1)
            if isinstance(e, ValidationError):
                err = e.errors()[0]
                field = ".".join(str(x) for x in err.get("loc", ()))
                msg = f"todos[{i}].{field}: {err.get('msg')} (got {err.get('input')!r})"
            else:
                msg = str(e)
            raise TodoError(f"{path}:{line}:{col}: {msg}") from None
    _assign_keys(items)
    return _Parsed(items=items, extra=extra, bare_list=bare)


def _assign_keys(items: Sequence[TodoItem]) -> None:
    """Merge identity: the id when there is one, else the content (numbered when it repeats)."""
    seen: dict[str, int] = {}
    for it in items:
        base = f"id:{it.id}" if it.id else f"c:{it.content}"
        n = seen.get(base, 0)
        seen[base] = n + 1
        it._key = base if n == 0 else f"{base}#{n}"


def _merge_dict(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Three-way merge of flat dicts: a side that changed a field wins; both changed → ours."""
    out: dict[str, Any] = {}
    missing = object()
    for k in list(dict.fromkeys([*theirs, *ours])):
        b, o, t = base.get(k, missing), ours.get(k, missing), theirs.get(k, missing)
        v = t if o == b else o
        if v is not missing:
            out[k] = v
    return out


def _merge_order(primary: list[str], secondary: list[str], keep: set[str]) -> list[str]:
    out = [k for k in primary if k in keep]
    placed = set(out)
    for i, k in enumerate(secondary):
        if k in placed or k not in keep:
            continue
        pred = next((p for p in reversed(secondary[:i]) if p in placed), None)
        out.insert(out.index(pred) + 1 if pred is not None else 0, k)
        placed.add(k)
    out.extend(k for k in keep if k not in placed)
    return out


def merge_items(base: list[TodoItem], ours: list[TodoItem], theirs: list[TodoItem]) -> list[TodoItem]:
    """Three-way merge of item lists by identity; no edit of either side is lost.

    An item deleted on one side and edited on the other is kept (the edit is work someone did).
    """
    bd = {it._key: it.to_file_dict() for it in base}
    od = {it._key: it.to_file_dict() for it in ours}
    td = {it._key: it.to_file_dict() for it in theirs}
    merged: dict[str, dict[str, Any]] = {}
    for k in dict.fromkeys([*td, *od]):
        b, o, t = bd.get(k), od.get(k), td.get(k)
        if o is not None and t is not None:
            merged[k] = _merge_dict(b or {}, o, t) if b is not None else o
        elif o is not None:  # theirs lacks it: they deleted it, or it is new on our side
            if b is None or o != b:
                merged[k] = o
        elif t is not None and (b is None or t != b):
            merged[k] = t
    base_order = [it._key for it in base]
    our_order = [it._key for it in ours]
    their_order = [it._key for it in theirs]
    ours_moved = [k for k in our_order if k in bd] != [k for k in base_order if k in od]
    primary, secondary = (our_order, their_order) if ours_moved else (their_order, our_order)
    order = _merge_order([k for k in primary if k is not None], [k for k in secondary if k], set(merged))
    out: list[TodoItem] = []
    for k in order:
        it = TodoItem.model_validate(merged[k])
        it._key = k
        out.append(it)
    return out


class TodoStore:
    """The checklist file: load, edit, save atomically, reload and merge when someone else writes it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.items: list[TodoItem] = []
        self.error: str | None = None
        self.read_only: bool = False
        self.auto_complete: bool = False  # the user's switch; an item may also opt in with "auto_complete"
        self.extra: dict[str, Any] = {}
        self._bare_list = False
        self._base: list[TodoItem] = []
        self._base_extra: dict[str, Any] = {}
        self._sig: _Sig | None = None

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    # -- reading

    def _read_disk(self) -> tuple[_Parsed, _Sig | None]:
        """The file as it is now (empty when missing); TodoError when it is corrupt."""
        for _ in range(5):  # a stat/read pair that straddles a replace is retried
            sig = _stat_sig(self.path)
            if sig is None:
                return _Parsed(items=[], extra={}, bare_list=False), None
            if self.path.is_dir():
                raise TodoError(
                    f"{self.path} is a directory, not a todo file (give a file path with --todos)"
                )
            try:
                text = _read_bounded(self.path)
            except FileNotFoundError:
                continue
            except UnicodeDecodeError as e:
                raise TodoError(f"{self.path}:1:{e.start + 1}: not UTF-8 text") from None
            except OSError as e:
                raise TodoError(f"{self.path}: cannot read: {e.strerror or e}") from None
            if _stat_sig(self.path) == sig:
                return _parse(text, self.path), sig
        return _parse(text, self.path), _stat_sig(self.path)

    def _adopt(self, parsed: _Parsed, sig: _Sig | None) -> None:
        self.items = parsed.items
        self.extra = parsed.extra
        self._bare_list = parsed.bare_list
        self._base = [it.model_copy(deep=True) for it in parsed.items]
        for b, it in zip(self._base, parsed.items, strict=True):
            b._key = it._key
        self._base_extra = copy.deepcopy(parsed.extra)
        self._sig = sig
        self.error = None
        self.read_only = False

    def load(self) -> None:
        """Read the file; a corrupt one sets `error` and `read_only` and is left exactly as it is."""
        try:
            parsed, sig = self._read_disk()
        except TodoError as e:
            self.error, self.read_only, self._sig = str(e), True, _stat_sig(self.path)
            return
        self._adopt(parsed, sig)

    def reload_if_changed(self) -> bool:
        """Cheap check (stat only) for a change on disk; merges it into memory. True when anything changed."""
        sig = _stat_sig(self.path)
        if sig == self._sig:
            return False
        try:
            parsed, sig = self._read_disk()
        except TodoError as e:
            changed = self.error != str(e)
            self.error, self.read_only, self._sig = str(e), True, sig
            return changed
        if self.error is not None:  # the file was repaired: take it as it is
            self._adopt(parsed, sig)
            return True
        before = [it.to_file_dict() for it in self.items]
        merged = merge_items(self._base, self.items, parsed.items)
        extra = _merge_dict(self._base_extra, self.extra, parsed.extra)
        self._adopt(parsed, sig)  # the disk version is the new base; our unsaved edits stay on top
        self.items, self.extra = merged, extra
        return [it.to_file_dict() for it in merged] != before

    # -- editing (index is 0-based)

    def _writable(self) -> None:
        if self.read_only:
            raise TodoError(f"read-only: {self.error or 'the file cannot be written'}")

    def _at(self, index: int) -> TodoItem:
        if not 0 <= index < len(self.items):
            raise TodoError(f"no item {index + 1} (there are {len(self.items)})")
        return self.items[index]

    def add(self, content: str, priority: str = "medium", check: str | None = None) -> TodoItem:
        self._writable()
        if not content.strip():
            raise TodoError("an item needs some text")
        if check is not None:
            parse_check(check)
        item = TodoItem(
            content=content, priority=priority, status="pending", id=uuid.uuid4().hex[:12], check=check
        )
        item._key = f"id:{item.id}"
        self.items.append(item)
        return item

    def set_status(self, index: int, status: str) -> None:
        self._writable()
        if status not in STATUSES:
            raise TodoError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        self._at(index).status = status  # type: ignore[assignment]

    def edit(
        self,
        index: int,
        content: str | None = None,
        priority: str | None = None,
        check: str | None = None,
    ) -> None:
        """Change fields; check="" removes the evidence link."""
        self._writable()
        it = self._at(index)
        if priority is not None and priority not in PRIORITIES:
            raise TodoError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
        if check:
            parse_check(check)
        if content is not None:
            if not content.strip():
                raise TodoError("an item needs some text")
            it.content = content
        if priority is not None:
            it.priority = priority  # type: ignore[assignment]
        if check is not None:
            it.check = check or None

    def delete(self, index: int) -> None:
        self._writable()
        self._at(index)
        del self.items[index]

    def move(self, index: int, delta: int) -> None:
        self._writable()
        it = self._at(index)
        new = max(0, min(len(self.items) - 1, index + delta))
        del self.items[index]
        self.items.insert(new, it)

    # -- writing

    def _document(self) -> Any:
        todos = [it.to_file_dict() for it in self.items]
        if self._bare_list:
            return todos
        return {"todos": todos, **self.extra}

    def save(self) -> None:
        """Atomic save with one backup; merges first when the file changed on disk since we read it.

        The merge is redone when the file changes again between our read and our rename, so an editor
        that writes during our save loses nothing (short of a write inside the last stat-to-rename gap).
        """
        self._writable()
        try:
            if self.path.is_dir():
                raise IsADirectoryError(21, "is a directory, not a file")
            if atomicio.is_special(self.path):  # /dev/null, a FIFO: written as it is, no lock file next to it
                self._save_locked()
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock_path = self.path.with_name(self.path.name + ".lock")
            with open(lock_path, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # our own writers take turns; foreign editors are merged
                try:
                    self._save_locked()
                    self._sweep_temp_files()
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
        except OSError as e:
            raise TodoError(
                f"not saved: cannot write {self.path}: {e.strerror or e} (the file on disk is unchanged)"
            ) from None

    def _sweep_temp_files(self, older_than_s: float = 60.0) -> None:
        """Temp files a killed writer left behind (ours are named .<file>.*.tmp), once they are stale."""
        now = time.time()
        for pat in (f".{self.path.name}.*.tmp", f".{self.backup_path.name}.*.tmp"):
            for f in self.path.parent.glob(pat):
                with contextlib.suppress(OSError):
                    if now - f.stat().st_mtime > older_than_s:
                        f.unlink()

    def _save_locked(self) -> None:
        base, base_extra = self._base, self._base_extra
        ours, ours_extra, bare = self.items, self.extra, self._bare_list
        disk_sig = self._sig
        for _ in range(20):
            if _stat_sig(self.path) != disk_sig:
                try:
                    parsed, disk_sig = self._read_disk()
                except TodoError as e:
                    self.error, self.read_only = str(e), True
                    raise TodoError(f"not saved, the file on disk is corrupt: {e}") from None
                ours = merge_items(base, ours, parsed.items)
                ours_extra = _merge_dict(base_extra, ours_extra, parsed.extra)
                base, base_extra = parsed.items, parsed.extra
                bare = parsed.bare_list if disk_sig is not None else bare
            todos = [it.to_file_dict() for it in ours]
            doc: Any = todos if bare else {"todos": todos, **ours_extra}
            text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
            if _atomic_write(self.path, text, self.backup_path, expect=disk_sig):
                break
        else:
            raise TodoError(f"not saved: {self.path} keeps changing on disk")
        self._adopt(_Parsed(items=ours, extra=ours_extra, bare_list=bare), _stat_sig(self.path))
        self.items = [it.model_copy(deep=True) for it in self._base]
        for it, b in zip(self.items, self._base, strict=True):
            it._key = b._key


MAX_TODO_BYTES = 16 * 1024 * 1024


def _read_bounded(path: Path) -> str:
    """The file's text, at most MAX_TODO_BYTES: a device such as /dev/zero or /dev/full never ends."""
    with open(path, "rb") as f:
        data = f.read(MAX_TODO_BYTES + 1)
    if len(data) > MAX_TODO_BYTES:
        raise TodoError(f"{path}: larger than {MAX_TODO_BYTES // (1024 * 1024)} MiB, not a todo file")
    return data.decode("utf-8")


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _atomic_write(path: Path, text: str, backup: Path | None, expect: _Sig | None = None) -> bool:
    """The shared writer (atomicio): temp file in the same directory + fsync + os.replace + fsync of the
    directory; a special file (/dev/null, a FIFO) is written directly and never backed up or replaced.

    Returns False (and writes nothing) when the file's signature is no longer `expect` just before the
    rename: someone wrote it meanwhile and the caller must merge again.
    """
    if atomicio.is_special(path):
        return atomicio.write_file(path, text)

    def still_ours() -> bool:
        if backup is not None and path.is_file():
            _make_backup(path, backup)
        return _stat_sig(path) == expect

    return atomicio.write_file(path, text, before_replace=still_ours, tmp_suffix=".tmp")


def _make_backup(path: Path, backup: Path) -> None:
    """The previous version as <file>.bak: a hard link swapped in atomically, or a copy where links fail."""
    with contextlib.suppress(OSError):
        # a writer killed between backup and rename leaves <file> and <file>.bak as one inode; rename() of
        # two links to one inode does nothing, so the temp link would stay behind: the backup is already right
        if os.path.samestat(os.stat(path), os.stat(backup)):
            return
    tmp = backup.with_name(f".{backup.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        os.link(path, tmp)
    except OSError:
        try:
            data = path.read_bytes()
        except OSError:
            return
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, backup)


# --- evidence -------------------------------------------------------------------------------------------

CheckKind = Literal["service", "bench", "host", "gpu"]
SERVICE_STATES = ("ready", "stopped", "starting", "unhealthy", "crashed", "unknown")
HOST_STATES = ("connected", "disconnected", "connecting")
GPU_METRICS = {"memory": "mem_used_mb", "mem": "mem_used_mb", "util": "util_gpu", "temp": "temp_c"}
OPS = ("<=", ">=", "<", ">", "==", "!=")
CHECK_HELP = (
    "expected one of: 'service HOST/SVC ready|stopped|starting|unhealthy|crashed', "
    "'bench HOST/SVC SET ok', 'host HOST connected|disconnected', "
    "'gpu HOST:IDX memory|util|temp <|>|<=|>= N' (memory in MiB)"
)


class Check(BaseModel):
    """A piece of evidence an item points at, parsed from its `check` text."""

    model_config = ConfigDict(frozen=True)

    kind: CheckKind
    host: str
    service: str | None = None
    state: str | None = None  # service / host state wanted
    prompt_set: str | None = None
    gpu_index: int | None = None
    metric: str | None = None  # memory | util | temp
    op: str | None = None
    value: float | None = None
    text: str = ""

    @property
    def service_ref(self) -> str:
        return f"{self.host}/{self.service}"


def _split_ref(ref: str, text: str) -> tuple[str, str]:
    host, sep, svc = ref.partition("/")
    if not sep or not host or not svc:
        raise ValueError(f"bad check {text!r}: {ref!r} is not HOST/SVC; {CHECK_HELP}")
    return host, svc


def parse_check(text: str) -> Check:
    """Parse a check text; ValueError with the accepted forms when it is not one of them."""
    raw = " ".join(text.split())
    # allow "memory<1000" without spaces around the operator
    words = re.sub(r"\s*(<=|>=|==|!=|<|>)\s*", r" \1 ", raw).split()
    if not words:
        raise ValueError(f"empty check; {CHECK_HELP}")
    kind = words[0].lower()
    if kind == "service" and len(words) == 3:
        host, svc = _split_ref(words[1], text)
        state = words[2].lower()
        if state not in SERVICE_STATES:
            raise ValueError(f"bad check {text!r}: unknown service state {words[2]!r}; {CHECK_HELP}")
        return Check(kind="service", host=host, service=svc, state=state, text=raw)
    if kind == "bench" and len(words) == 4:
        host, svc = _split_ref(words[1], text)
        if words[3].lower() != "ok":
            raise ValueError(f"bad check {text!r}: a bench check ends with 'ok'; {CHECK_HELP}")
        return Check(kind="bench", host=host, service=svc, prompt_set=words[2], state="ok", text=raw)
    if kind == "host" and len(words) == 3:
        state = words[2].lower()
        if state not in HOST_STATES:
            raise ValueError(f"bad check {text!r}: unknown host state {words[2]!r}; {CHECK_HELP}")
        return Check(kind="host", host=words[1], state=state, text=raw)
    if kind == "gpu" and len(words) == 5:
        host, sep, idx = words[1].rpartition(":")
        if not sep or not host or not idx.isdigit():
            raise ValueError(f"bad check {text!r}: {words[1]!r} is not HOST:INDEX; {CHECK_HELP}")
        metric = words[2].lower()
        if metric not in GPU_METRICS:
            raise ValueError(f"bad check {text!r}: unknown GPU metric {words[2]!r}; {CHECK_HELP}")
        if words[3] not in OPS:
            raise ValueError(f"bad check {text!r}: unknown comparison {words[3]!r}; {CHECK_HELP}")
        try:
            value = float(words[4])
        except ValueError:
            raise ValueError(f"bad check {text!r}: {words[4]!r} is not a number; {CHECK_HELP}") from None
        metric = "memory" if metric == "mem" else metric
        return Check(
            kind="gpu", host=host, gpu_index=int(idx), metric=metric, op=words[3], value=value, text=raw
        )
    raise ValueError(f"bad check {text!r}: {CHECK_HELP}")


class EvidenceContext(Protocol):
    """What evidence is judged against: the fleet's snapshot and the bench history."""

    snapshot: FleetSnapshot

    def bench_ok(self, service_ref: str, prompt_set: str) -> bool | None:
        """True: the latest finished run had no failed prompt; False: it had; None: no such run."""
        ...


EvidenceState = Literal["verified", "failing", "unknown", "none"]


class ItemEvidence(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int  # 0-based position in the list
    state: EvidenceState
    detail: str = ""
    mismatch: str | None = None


def _compare(a: float, op: str, b: float) -> bool:
    return {
        "<": a < b,
        ">": a > b,
        "<=": a <= b,
        ">=": a >= b,
        "==": a == b,
        "!=": a != b,
    }[op]


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def check_evidence(chk: Check, ctx: EvidenceContext) -> tuple[EvidenceState, str]:
    """Judge one check: verified / failing when observed, unknown when it cannot be observed now."""
    if chk.kind == "bench":
        ok = ctx.bench_ok(chk.service_ref, chk.prompt_set or "")
        if ok is None:
            return "unknown", f"no finished {chk.prompt_set} run of {chk.service_ref} in the bench history"
        if ok:
            return "verified", f"latest {chk.prompt_set} run of {chk.service_ref} had no failed prompt"
        return "failing", f"latest {chk.prompt_set} run of {chk.service_ref} had failed prompts"
    host = ctx.snapshot.host(chk.host)
    if host is None:
        return "unknown", f"no host '{chk.host}' in the fleet"
    if chk.kind == "host":
        st = "verified" if host.state == chk.state else "failing"
        err = f" ({host.error})" if host.error and host.state != "connected" else ""
        return st, f"host {chk.host} is {host.state}{err}"
    if host.state != "connected":
        return "unknown", f"host {chk.host} is {host.state}"
    if chk.kind == "service":
        svc = next((s for s in host.services if s.name == chk.service), None)
        if svc is None:
            return "unknown", f"no service '{chk.service_ref}' in the fleet"
        st = "verified" if svc.state == chk.state else "failing"
        return st, f"service {chk.service_ref} is {svc.state}"
    # gpu
    gpu = next((g for g in host.gpus if g.index == chk.gpu_index), None)
    if gpu is None:
        return "unknown", f"no GPU {chk.gpu_index} reported by {chk.host}"
    attr = GPU_METRICS[chk.metric or "memory"]
    val = getattr(gpu, attr)
    unit = {"memory": " MiB", "util": " %", "temp": " C"}[chk.metric or "memory"]
    if val is None:
        return "unknown", f"GPU {chk.host}:{chk.gpu_index} {chk.metric} is not reported"
    assert chk.op is not None and chk.value is not None
    holds = _compare(float(val), chk.op, chk.value)
    return (
        "verified" if holds else "failing",
        f"GPU {chk.host}:{chk.gpu_index} {chk.metric} is {_fmt(val)}{unit} "
        f"({'' if holds else 'not '}{chk.op} {_fmt(chk.value)})",
    )


def evaluate(items: Sequence[TodoItem], ctx: EvidenceContext) -> list[ItemEvidence]:
    """Each item's evidence state, and the mismatch between what it says and what the fleet shows."""
    out: list[ItemEvidence] = []
    for i, it in enumerate(items):
        if not it.check:
            out.append(ItemEvidence(index=i, state="none"))
            continue
        try:
            chk = parse_check(it.check)
        except ValueError as e:
            out.append(ItemEvidence(index=i, state="unknown", detail=str(e)))
            continue
        state, detail = check_evidence(chk, ctx)
        mismatch = None
        if it.status == "completed" and state == "failing":
            mismatch = "completed but evidence fails"
        elif state == "verified" and it.status in ("pending", "in_progress"):
            mismatch = f"evidence holds but still {it.status}"
        out.append(ItemEvidence(index=i, state=state, detail=detail, mismatch=mismatch))
    return out


def apply_auto_complete(
    store: TodoStore, evidence: Sequence[ItemEvidence], allowed: bool | None = None
) -> list[int]:
    """Complete the items whose evidence holds, when the user allows it; saves; returns their indices.

    Allowed: `allowed` when given, else the store's `auto_complete` switch; an item with
    `"auto_complete": true` in the file opts in on its own.
    """
    if store.read_only:
        return []
    on = store.auto_complete if allowed is None else allowed
    done: list[int] = []
    for ev in evidence:
        if ev.state != "verified" or not 0 <= ev.index < len(store.items):
            continue
        it = store.items[ev.index]
        if it.status not in ("pending", "in_progress"):
            continue
        if on or getattr(it, "auto_complete", None) is True:
            it.status = "completed"
            done.append(ev.index)
    if done:
        store.save()
    return done


# --- bench history adapter ------------------------------------------------------------------------------


def _result_ref(r: dict[str, Any]) -> str | None:
    for key in ("service", "service_ref", "ref"):
        v = r.get(key)
        if isinstance(v, str) and "/" in v:
            return v
    host, svc = r.get("host"), r.get("service") or r.get("name")
    if isinstance(host, str) and isinstance(svc, str):
        return f"{host}/{svc}"
    return None


def _result_failed(r: dict[str, Any]) -> bool:
    if r.get("error"):
        return True
    for key in ("failed", "failed_prompts", "errors", "n_failed"):
        v = r.get(key)
        if isinstance(v, int | float) and v > 0:
            return True
        if isinstance(v, list) and v:
            return True
    for key in ("prompts", "requests", "samples"):
        v = r.get(key)
        if isinstance(v, list) and any(isinstance(p, dict) and p.get("error") for p in v):
            return True
    return False


def _run_finished(run: dict[str, Any]) -> bool:
    if run.get("finished") is False:
        return False
    status = run.get("status") or run.get("state")
    # an interrupted run (ctrl+c, a lost host) never ran some prompts: no evidence either way
    unfinished = ("running", "aborted", "cancelled", "started", "interrupted")
    return not (isinstance(status, str) and status.lower() in unfinished)


def _run_prompt_set(run: dict[str, Any]) -> str | None:
    for key in ("prompt_set", "prompts", "set"):
        v = run.get(key)
        if isinstance(v, str):
            return v
    cfg = run.get("config")
    if isinstance(cfg, dict):
        return _run_prompt_set(cfg)
    return None


class HistoryBenchContext:
    """Evidence context over a snapshot and the bench history JSONL.

    Assumed line shape (tolerant; unknown lines are skipped): one JSON object per finished run with
    `prompt_set` (or `prompts` / `config.prompt_set`), `results`: a list with `service` ("HOST/SVC", or
    `host` + `service`), and per result an `error` string and/or a `failed` count (a list of per-prompt
    results with `error` also counts). A run with `finished: false` or `status: running|aborted` is not
    finished and is ignored. The latest matching run decides.
    """

    def __init__(self, snapshot: FleetSnapshot, history: Path | None = None) -> None:
        self.snapshot = snapshot
        self.history = Path(history) if history else DEFAULT_HISTORY
        self._runs: list[dict[str, Any]] | None = None

    def _load(self) -> list[dict[str, Any]]:
        if self._runs is None:
            runs: list[dict[str, Any]] = []
            try:
                with open(self.history, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        try:
                            obj = json.loads(line)
                        except json.JSONDecodeError:
                            continue
                        if isinstance(obj, dict) and "kind" not in obj:  # plain runs: not load/soak lines
                            runs.append(obj)
            except OSError:
                pass
            self._runs = runs
        return self._runs

    def bench_ok(self, service_ref: str, prompt_set: str) -> bool | None:
        for run in reversed(self._load()):
            if _run_prompt_set(run) != prompt_set or not _run_finished(run):
                continue
            results = run.get("results")
            if not isinstance(results, list):
                continue
            mine = [r for r in results if isinstance(r, dict) and _result_ref(r) == service_ref]
            if mine:
                return not any(_result_failed(r) for r in mine)
        return None


_HISTORY_CACHE: dict[str, tuple[_Sig | None, HistoryBenchContext]] = {}


def bench_ok_from_history(history: Path | str, service_ref: str, prompt_set: str) -> bool | None:
    """`bench_ok` over a history file, re-read only when the file changed (the fleet asks every second)."""
    path = Path(history)
    sig = _stat_sig(path)
    cached = _HISTORY_CACHE.get(str(path))
    if cached is None or cached[0] != sig:
        cached = (sig, HistoryBenchContext(FleetSnapshot(), path))
        _HISTORY_CACHE[str(path)] = cached
    return cached[1].bench_ok(service_ref, prompt_set)

"""The checklist file: load, edit, save atomically (flock + fsync + rename, one backup) and merge.

The file is `{"todos": [{"content", "priority", "status", ...}], ...}` (a bare list is read too and written
back as a list). Every field this module does not know is kept, on items and at the top level, because other
tools (todowrite, an editor) share the file. Saves merge with an on-disk version that changed since we read
it, so a concurrent edit is never lost. A corrupt file is never replaced: the store turns read-only and says
where the parse failed. While a fleet runs, the Fleet is this store's only writer (`Fleet.todo_apply`).
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
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ddtree_tui.lib.jsontypes import JsonObject, JsonValue
from ddtree_tui.model.todo import PRIORITIES, STATUSES, TodoEdit, TodoItem, TodoResult
from ddtree_tui.remote import atomicio
from ddtree_tui.todo.model import TodoError, parse_check

Sig = tuple[int, int, int]  # inode, mtime_ns, size


def stat_sig(path: Path) -> Sig | None:
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


def _ident(it: TodoItem) -> str:
    """The item's merge identity (set on every item read or added; its content otherwise)."""
    return it._key if it._key is not None else f"c:{it.content}"


def merge_items(base: list[TodoItem], ours: list[TodoItem], theirs: list[TodoItem]) -> list[TodoItem]:
    """Three-way merge of item lists by identity; no edit of either side is lost.

    An item deleted on one side and edited on the other is kept (the edit is work someone did).
    """
    bd = {_ident(it): it.to_file_dict() for it in base}
    od = {_ident(it): it.to_file_dict() for it in ours}
    td = {_ident(it): it.to_file_dict() for it in theirs}
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
    base_order = [_ident(it) for it in base]
    our_order = [_ident(it) for it in ours]
    their_order = [_ident(it) for it in theirs]
    ours_moved = [k for k in our_order if k in bd] != [k for k in base_order if k in od]
    primary, secondary = (our_order, their_order) if ours_moved else (their_order, our_order)
    order = _merge_order(primary, [k for k in secondary if k], set(merged))
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
        self._sig: Sig | None = None

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    # -- reading

    def _read_disk(self) -> tuple[_Parsed, Sig | None]:
        """The file as it is now (empty when missing); TodoError when it is corrupt."""
        for _ in range(5):  # a stat/read pair that straddles a replace is retried
            sig = stat_sig(self.path)
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
            if stat_sig(self.path) == sig:
                return _parse(text, self.path), sig
        return _parse(text, self.path), stat_sig(self.path)

    def _adopt(self, parsed: _Parsed, sig: Sig | None) -> None:
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
            self.error, self.read_only, self._sig = str(e), True, stat_sig(self.path)
            return
        self._adopt(parsed, sig)

    def reload_if_changed(self) -> bool:
        """Cheap check (stat only) for a change on disk; merges it into memory. True when anything changed."""
        sig = stat_sig(self.path)
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
        if priority not in PRIORITIES:
            raise TodoError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
        item = TodoItem.model_validate(
            {
                "content": content,
                "priority": priority,
                "status": "pending",
                "id": uuid.uuid4().hex[:12],
                "check": check,
            }
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

    def apply(self, edit: TodoEdit) -> TodoResult:
        """Make one TodoEdit in memory (the caller saves); TodoError for a bad index or value."""
        i = edit.index
        if edit.action == "add":
            if not edit.content:
                raise TodoError("a new item needs its text")
            it = self.add(edit.content, edit.priority or "medium", edit.check or None)
            return TodoResult(ok=True, message=f"todo added: {it.content}", index=len(self.items) - 1)
        if i is None:
            raise TodoError(f"todo {edit.action} needs an item number")
        self._writable()
        it = self._at(i)
        where: int = i
        if edit.action == "edit":
            self.edit(i, content=edit.content, priority=edit.priority, check=edit.check)
        elif edit.action == "toggle":
            self.set_status(i, "pending" if it.status == "completed" else "completed")
        elif edit.action == "delete":
            self.delete(i)
            where = max(0, i - 1)
        elif edit.action in ("up", "down"):
            delta = -1 if edit.action == "up" else 1
            self.move(i, delta)
            where = max(0, min(len(self.items) - 1, i + delta))
        else:
            self.set_status(i, _STATUS_OF[edit.action])
        return TodoResult(ok=True, message=f"todo {i + 1}: {edit.action}", index=where)

    def checkpoint(self) -> tuple[list[TodoItem], JsonObject]:
        """The items and top-level fields as they are now, to put back with `restore` when a save fails."""
        return copy_items(self.items), copy.deepcopy(self.extra)

    def restore(self, saved: tuple[list[TodoItem], JsonObject]) -> None:
        items, extra = saved
        self.items, self.extra = copy_items(items), copy.deepcopy(extra)

    # -- writing

    def document(self) -> JsonValue:
        """The file's content as it would be written now (the `todo list --json` output)."""
        todos: list[JsonValue] = [it.to_file_dict() for it in self.items]
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
            if stat_sig(self.path) != disk_sig:
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
        self._adopt(_Parsed(items=ours, extra=ours_extra, bare_list=bare), stat_sig(self.path))
        self.items = [it.model_copy(deep=True) for it in self._base]
        for it, b in zip(self.items, self._base, strict=True):
            it._key = b._key


MAX_TODO_BYTES = 16 * 1024 * 1024


_STATUS_OF = {"start": "in_progress", "complete": "completed", "cancel": "cancelled"}


def copy_items(items: Sequence[TodoItem]) -> list[TodoItem]:
    """Deep copies that keep each item's merge identity."""
    out = []
    for it in items:
        c = it.model_copy(deep=True)
        c._key = it._key
        out.append(c)
    return out


def _read_bounded(path: Path) -> str:
    """The file's text, at most MAX_TODO_BYTES: a device such as /dev/zero or /dev/full never ends."""
    with open(path, "rb") as f:
        data = f.read(MAX_TODO_BYTES + 1)
    if len(data) > MAX_TODO_BYTES:
        raise TodoError(f"{path}: larger than {MAX_TODO_BYTES // (1024 * 1024)} MiB, not a todo file")
    return data.decode("utf-8")


def _atomic_write(path: Path, text: str, backup: Path | None, expect: Sig | None = None) -> bool:
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
        return stat_sig(path) == expect

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

"""Reading run JSON files for a report: every problem is one clear sentence that names the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ddtree_tui.bench.models import BENCH_SCHEMA, BenchRun
from ddtree_tui.lib.jsontypes import JsonObject

M = TypeVar("M", bound=BaseModel)


class ReportInputError(Exception):
    """A report input that cannot be used; the message names the file."""


class LoadedRun(BaseModel):
    """One run of a report: where it came from, the run, and the raw JSON (for keys later issues add)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    path: str
    label: str  # A, B, C, ...
    run: BenchRun
    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def simulated(self) -> bool:
        return any(t.simulated for t in self.run.targets)

    @property
    def replay(self) -> bool:
        return any(t.telemetry == "replay" for t in self.run.targets)


def parse_run(text: str, path: str) -> tuple[BenchRun, JsonObject]:
    """The run in `text` (read from `path`); ReportInputError names the file and what is wrong."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1:
            try:
                first = json.loads(lines[0])
            except json.JSONDecodeError:
                first = None
            if isinstance(first, dict) and "schema" in first:
                raise ReportInputError(
                    f"{path}: a history file (one run a line), not one run's JSON; "
                    "use the file written by --run-bench --json FILE"
                ) from None
        raise ReportInputError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(obj, dict) or "schema" not in obj or "results" not in obj:
        raise ReportInputError(
            f"{path}: not a bench run (expected the object --run-bench --json writes, "
            'with "schema" and "results"; or a sweep\'s results.json, with "sweep_id" and "points")'
        )
    run = validated(BenchRun, obj, path, schema=BENCH_SCHEMA, kind="bench", invalid="not a valid bench run")
    return run, obj


def validated(model: type[M], obj: JsonObject, path: str, *, schema: object, kind: str, invalid: str) -> M:
    """`obj` as `model` when its "schema" is the one this version reads; else ReportInputError with the file,
    the first bad field and why (a run and a sweep's results are checked the same way)."""
    if obj.get("schema") != schema:
        raise ReportInputError(
            f"{path}: {kind} schema {obj.get('schema')!r}; this ddtree-tui reads schema {schema}"
        )
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ReportInputError(f"{path}: {invalid}: {where}: {err['msg']}") from None


def read_input(path: str, what: str) -> str:
    """The text of an input file; ReportInputError says why it cannot be read (`what` it should have been)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportInputError(f"{path}: is a directory, not {what}") from None
    except UnicodeDecodeError:
        raise ReportInputError(f"{path}: not a text file (not UTF-8)") from None
    except OSError as e:
        raise ReportInputError(f"{path}: cannot read: {e.strerror or e}") from None


def load_runs(paths: list[str]) -> list[LoadedRun]:
    """Every file in order, labelled A, B, C, …; the first problem raises ReportInputError."""
    out: list[LoadedRun] = []
    for i, p in enumerate(paths):
        text = read_input(p, "a run JSON file")
        run, raw = parse_run(text, p)
        out.append(LoadedRun(path=p, label=run_label(i), run=run, raw=raw))
    return out


def run_label(i: int) -> str:
    """A … Z, then R27, R28, …"""
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"

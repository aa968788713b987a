"""Evidence: the rules that judge a todo item's `check` against what the core observes, and complete items
whose evidence holds when the user allows it.

Inputs are typed: the FleetSnapshot (hosts, services, GPUs) and the bench history's BenchRun records. This
module imports neither the fleet nor the commands: callers hand it a snapshot and runs (EvidenceContext).
The snapshot type is imported for annotations only (it is only read here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ddtree_tui.bench import history as bench_history
from ddtree_tui.bench.history import DEFAULT_HISTORY
from ddtree_tui.bench.models import BenchRun
from ddtree_tui.model.todo import EvidenceState, ItemEvidence, TodoItem, TodoView
from ddtree_tui.todo.model import Check, parse_check
from ddtree_tui.todo.store import Sig, TodoStore, copy_items, stat_sig

if TYPE_CHECKING:
    from ddtree_tui.model.snapshot import FleetSnapshot, GpuSample


class EvidenceContext(Protocol):
    """What evidence is judged against: the fleet's snapshot and the bench history."""

    snapshot: FleetSnapshot

    def bench_ok(self, service_ref: str, prompt_set: str) -> bool | None:
        """True: the latest finished run had no failed prompt; False: it had; None: no such run."""
        ...


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
            return "unknown", (
                f"no finished {chk.prompt_set} run of {chk.service_ref} with a verified target identity "
                "in the bench history"
            )
        if ok:
            return "verified", f"latest {chk.prompt_set} run of {chk.service_ref} had no failed prompt"
        return "failing", f"latest {chk.prompt_set} run of {chk.service_ref} had failed prompts"
    host = ctx.snapshot.host(chk.host)
    if host is None:
        return "unknown", f"no host '{chk.host}' in the fleet"
    if chk.kind == "host":
        st: EvidenceState = "verified" if host.state == chk.state else "failing"
        err = f" ({host.error})" if host.error and host.state != "connected" else ""
        return st, f"host {chk.host} is {host.state}{err}"
    if host.state != "connected":
        return "unknown", f"host {chk.host} is {host.state}"
    if chk.kind == "service":
        svc = next((s for s in host.services if s.name == chk.service), None)
        if svc is None:
            return "unknown", f"no service '{chk.service_ref}' in the fleet"
        sst: EvidenceState = "verified" if svc.state == chk.state else "failing"
        return sst, f"service {chk.service_ref} is {svc.state}"
    # gpu
    gpu = next((g for g in host.gpus if g.index == chk.gpu_index), None)
    if gpu is None:
        return "unknown", f"no GPU {chk.gpu_index} reported by {chk.host}"
    val = _gpu_value(gpu, chk.metric or "memory")
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
    store: TodoStore, evidence: Sequence[ItemEvidence], allowed: bool | None = None, *, save: bool = True
) -> list[int]:
    """Complete the items whose evidence holds, when the user allows it; saves (unless `save` is False: the
    Fleet saves off its event loop); returns their indices.

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
        if on or it.opts_in:
            it.status = "completed"
            done.append(ev.index)
    if done and save:
        store.save()
    return done


def _gpu_value(gpu: GpuSample, metric: str) -> float | None:
    """The sample's value for a check's metric (memory in MiB, util in %, temp in C)."""
    if metric == "util":
        return gpu.util_gpu
    if metric == "temp":
        return gpu.temp_c
    return gpu.mem_used_mb


def todo_view(store: TodoStore, evidence: Sequence[ItemEvidence] = ()) -> TodoView:
    """The list as the snapshot carries it (copies: the snapshot never changes under a reader)."""
    return TodoView(
        items=copy_items(store.items),
        evidence=list(evidence),
        error=store.error,
        read_only=store.read_only,
        path=str(store.path),
    )


# --- bench runs -----------------------------------------------------------------------------------------


def bench_ok(runs: Sequence[BenchRun], service_ref: str, prompt_set: str) -> bool | None:
    """True: the latest complete `prompt_set` run that measured the service had no failed request; False:
    it had; None: there is no such run. An interrupted run never ran some prompts: no evidence either way.
    Only a run that verified who answered on the service's port counts (issue 29): a run without a recorded
    identity, or one measured with --force, may have measured a foreign process under the service's name."""
    for run in reversed(runs):
        if run.prompt_set != prompt_set or run.status != "complete" or not verified(run, service_ref):
            continue
        mine = [r for r in run.results if r.service == service_ref and not r.warmup]
        if mine:
            return all(r.ok and not r.error for r in mine)
        summary = [s for s in run.summary if s.service == service_ref]
        if summary:
            return not any(s.failed for s in summary)
    return None


def verified(run: BenchRun, service_ref: str) -> bool:
    """Whether the run recorded a verified identity for the service (its listener was the service named)."""
    return any(t.ref == service_ref and t.identity is not None and t.identity.verified for t in run.targets)


class RunsContext:
    """An EvidenceContext over a snapshot and bench runs already in memory."""

    def __init__(self, snapshot: FleetSnapshot, runs: Sequence[BenchRun]) -> None:
        self.snapshot = snapshot
        self.runs = list(runs)

    def bench_ok(self, service_ref: str, prompt_set: str) -> bool | None:
        return bench_ok(self.runs, service_ref, prompt_set)


class HistoryBenchContext(RunsContext):
    """An EvidenceContext over a snapshot and the bench history JSONL (BenchRun lines; unreadable lines are
    skipped, a missing file is an empty history), each check's run read from the file's end when asked
    (history_bench_ok)."""

    def __init__(self, snapshot: FleetSnapshot, history: Path | None = None) -> None:
        self.history = Path(history) if history else DEFAULT_HISTORY
        super().__init__(snapshot, [])

    def bench_ok(self, service_ref: str, prompt_set: str) -> bool | None:
        return history_bench_ok(self.history, service_ref, prompt_set)


class VerdictsContext(RunsContext):
    """An EvidenceContext over a snapshot and bench verdicts already decided (history_verdicts): what the
    fleet judges its todo list against on the event loop, the history read in a thread beforehand."""

    def __init__(self, snapshot: FleetSnapshot, verdicts: dict[tuple[str, str], bool | None]) -> None:
        super().__init__(snapshot, [])
        self.verdicts = verdicts

    def bench_ok(self, service_ref: str, prompt_set: str) -> bool | None:
        return self.verdicts.get((service_ref, prompt_set))


def bench_keys(items: Sequence[TodoItem]) -> set[tuple[str, str]]:
    """(service ref, prompt set) of every bench check of `items`: the history verdicts their evidence needs
    (none: the history is not read at all)."""
    keys: set[tuple[str, str]] = set()
    for it in items:
        if not it.check:
            continue
        try:
            chk = parse_check(it.check)
        except ValueError:
            continue
        if chk.kind == "bench":
            keys.add((chk.service_ref, chk.prompt_set or ""))
    return keys


_VERDICTS: dict[str, tuple[Sig | None, dict[tuple[str, str], bool | None]]] = {}


def history_verdicts(history: Path | str, keys: set[tuple[str, str]]) -> dict[tuple[str, str], bool | None]:
    """history_bench_ok of each key (in a thread: it reads the file)."""
    return {k: history_bench_ok(history, *k) for k in keys}


def history_bench_ok(history: Path | str, service_ref: str, prompt_set: str) -> bool | None:
    """`bench_ok` over a history file: its plain runs read from the end (history.lines_backward) until the
    latest that decides it, so a check costs the bytes of the runs since that one, not the whole file that
    every run makes longer; cached by the file's signature (the fleet asks every second)."""
    path = Path(history)
    sig = stat_sig(path)
    entry = _VERDICTS.get(str(path))
    if entry is None or entry[0] != sig:
        entry = (sig, {})
        _VERDICTS[str(path)] = entry
    key = (service_ref, prompt_set)
    if key not in entry[1]:
        entry[1][key] = None if sig is None else _scan(path, service_ref, prompt_set)
    return entry[1][key]


def _plain(text: str) -> bytes | None:
    """`text` as it appears inside a JSON string when JSON writes it unescaped (printable ASCII without a
    quote or backslash), to skip lines without it cheaply; None when it may be written escaped."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return text.encode()
    return None


def _scan(path: Path, service_ref: str, prompt_set: str) -> bool | None:
    try:
        lines = bench_history.lines_backward(path)
    except FileNotFoundError:
        return None
    needles = [b for b in (_plain(service_ref), _plain(prompt_set)) if b]
    with contextlib.closing(lines):
        for line in lines:
            if line.startswith(b'{"schema":2') or not all(b in line for b in needles):
                continue  # a load, soak or agentic run's line (as written), or not a run of this check
            run = bench_history.parse_plain(line)
            if run is None:
                continue
            ok = bench_ok([run], service_ref, prompt_set)
            if ok is not None:
                return ok
    return None


def bench_ok_from_history(history: Path | str, service_ref: str, prompt_set: str) -> bool | None:
    """`bench_ok` over a history file (history_bench_ok)."""
    return history_bench_ok(history, service_ref, prompt_set)

"""Evidence: the rules that judge a todo item's `check` against what the core observes, and complete items
whose evidence holds when the user allows it.

Inputs are typed: the FleetSnapshot (hosts, services, GPUs) and the bench history's BenchRun records. This
module imports neither the fleet nor the commands: callers hand it a snapshot and runs (EvidenceContext).
The snapshot type is imported for annotations only (it is only read here).
"""

from __future__ import annotations

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
    skipped, a missing file is an empty history)."""

    def __init__(self, snapshot: FleetSnapshot, history: Path | None = None) -> None:
        self.history = Path(history) if history else DEFAULT_HISTORY
        super().__init__(snapshot, bench_history.load(self.history))


_RUNS_CACHE: dict[str, tuple[Sig | None, list[BenchRun]]] = {}


def history_runs(history: Path | str) -> list[BenchRun]:
    """The history file's runs, re-read only when the file changed (the fleet asks every second)."""
    path = Path(history)
    sig = stat_sig(path)
    cached = _RUNS_CACHE.get(str(path))
    if cached is None or cached[0] != sig:
        cached = (sig, bench_history.load(path))
        _RUNS_CACHE[str(path)] = cached
    return cached[1]


def bench_ok_from_history(history: Path | str, service_ref: str, prompt_set: str) -> bool | None:
    """`bench_ok` over a history file (cached by the file's signature)."""
    return bench_ok(history_runs(history), service_ref, prompt_set)

"""Runs side by side: estimates with intervals, deltas within a run (paired against its baseline) and across
runs (aligned on service and prompt), the reasons two runs are not comparable, and the terminal table.

Pure: BenchRun in, models and text out (the HTML report and `ddtree-tui report A.json B.json` share it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from ddtree_tui.bench.metrics import baseline_delta
from ddtree_tui.bench.models import BenchRun, RequestResult
from ddtree_tui.bench.report import render_table
from ddtree_tui.bench.stats import (
    Delta,
    Estimate,
    bootstrap_delta,
    ci_text,
    fmt_pct,
    mean_ci,
    paired_delta,
    stored_delta,
    verdict,
)
from ddtree_tui.report.runs import LoadedRun

Metric = Callable[[RequestResult], float | None]


def tok_s(r: RequestResult) -> float | None:
    return r.tok_s


def ttft_ms(r: RequestResult) -> float | None:
    return None if r.ttft_s is None else r.ttft_s * 1000.0


# name -> (getter, higher is better, words for better / worse)
METRICS: dict[str, tuple[Metric, bool, tuple[str, str]]] = {
    "tok/s": (tok_s, True, ("faster", "slower")),
    "TTFT": (ttft_ms, False, ("lower TTFT", "higher TTFT")),
}


def ok_results(run: BenchRun, service: str, prompt: str | None = None) -> list[RequestResult]:
    return [
        r
        for r in run.results
        if r.ok and not r.warmup and r.service == service and (prompt is None or r.prompt_id == prompt)
    ]


def values(run: BenchRun, service: str, prompt: str | None = None, metric: Metric = tok_s) -> list[float]:
    return [v for v in (metric(r) for r in ok_results(run, service, prompt)) if v is not None]


def estimate(run: BenchRun, service: str, prompt: str | None = None, metric: Metric = tok_s) -> Estimate:
    """Mean of the requests with a 95 % t interval (over repeats, or over all requests of the service)."""
    return mean_ci(values(run, service, prompt, metric))


def _declared_then_seen(declared: list[str], seen: Iterable[str]) -> list[str]:
    """The run's declared names in order, then any that only its results name (first seen first)."""
    out = list(declared)
    out.extend(x for x in dict.fromkeys(seen) if x not in declared)
    return out


def services(run: BenchRun) -> list[str]:
    return _declared_then_seen([t.ref for t in run.targets], (r.service for r in run.results))


def prompt_ids(run: BenchRun) -> list[str]:
    return _declared_then_seen([p.id for p in run.prompts], (r.prompt_id for r in run.results))


def paired_vs_baseline(
    run: BenchRun, service: str, prompt: str | None = None, metric: Metric = tok_s
) -> Delta | None:
    """`service` vs the run's baseline, paired on (prompt, repeat): the runner measures them back to back.

    None without a baseline or for the baseline itself."""
    base = run.baseline
    if not base or base == service:
        return None
    a = {(r.prompt_id, r.repeat): metric(r) for r in ok_results(run, base, prompt)}
    b = {(r.prompt_id, r.repeat): metric(r) for r in ok_results(run, service, prompt)}
    return paired_delta([(a[k], b[k]) for k in sorted(a.keys() & b.keys())])


def run_delta(run: BenchRun, service: str, metric: str = "tok/s") -> Delta | None:
    """`service` vs the run's baseline over the whole run: the figure the run stored when it was summarized
    (metrics.baseline_delta, computed once), which every face prints; a run saved without it gets that same
    function. None without a baseline or for the baseline itself."""
    base = run.baseline
    if not base or base == service:
        return None
    s = next((x for x in run.summary if x.service == service), None)
    if s is not None and metric == "tok/s" and s.delta_method is not None:
        return stored_delta(
            s.delta_tok_s_pct, s.delta_tok_s_lo_pct, s.delta_tok_s_hi_pct, s.delta_n, s.delta_method
        )
    if s is not None and metric == "TTFT" and s.delta_ttft_method is not None:
        return stored_delta(
            s.delta_ttft_mean_pct,
            s.delta_ttft_lo_pct,
            s.delta_ttft_hi_pct,
            s.delta_ttft_n,
            s.delta_ttft_method,
        )
    return baseline_delta(
        [r for r in run.results if not r.warmup], base, service, "TTFT" if metric == "TTFT" else "tok/s"
    )


def cross_run_delta(
    a: BenchRun, b: BenchRun, service: str, prompt: str | None = None, metric: Metric = tok_s, seed: int = 0
) -> Delta:
    """`service` in run b vs run a: unpaired bootstrap, one stratum per prompt (runs are not interleaved)."""
    pids = [prompt] if prompt is not None else [p for p in prompt_ids(a) if p in prompt_ids(b)]
    strata = {p: (values(a, service, p, metric), values(b, service, p, metric)) for p in pids}
    return bootstrap_delta(strata, seed=seed)


def _model_of(run: BenchRun, service: str) -> str | None:
    t = next((t for t in run.targets if t.ref == service), None)
    return t.model_path if t else None


def comparability(a: LoadedRun, b: LoadedRun) -> list[str]:
    """Why b cannot be compared with a (empty: comparable): sampling, models, prompt set; also load shape."""
    why: list[str] = []
    sa, sb = a.run.sampling, b.run.sampling
    diffs = [
        f"{k} {getattr(sa, k)} vs {getattr(sb, k)}"
        for k in ("max_new_tokens", "temperature", "ignore_eos", "api")
        if getattr(sa, k) != getattr(sb, k)
    ]
    if diffs:
        why.append("different sampling: " + ", ".join(diffs))
    pa, pb = prompt_ids(a.run), prompt_ids(b.run)
    if a.run.prompt_set != b.run.prompt_set or set(pa) != set(pb):
        why.append(f"different prompt set: {a.run.prompt_set} ({len(pa)}) vs {b.run.prompt_set} ({len(pb)})")
    common = [s for s in services(a.run) if s in services(b.run)]
    if not common:
        why.append("no service in common")
    models = [
        f"{s}: {_model_of(a.run, s)} vs {_model_of(b.run, s)}"
        for s in common
        if _model_of(a.run, s) != _model_of(b.run, s)
    ]
    if models:
        why.append("different model: " + "; ".join(models))
    if a.run.concurrency != b.run.concurrency:
        why.append(f"different load: concurrency {a.run.concurrency} vs {b.run.concurrency}")
    if a.simulated != b.simulated:
        why.append("one run is SIMULATED, the other is not")
    return why


class AlignedRow(BaseModel):
    """One service (and prompt; None: all prompts) across runs: the estimate in each, the delta vs the first."""

    model_config = ConfigDict(frozen=True)

    service: str
    prompt: str | None
    estimates: list[Estimate | None]  # one per run; None: not in that run
    deltas: list[Delta | None]  # one per run; the first is None (the reference)
    verdicts: list[str]


def aligned(runs: Sequence[LoadedRun], metric_name: str = "tok/s") -> list[AlignedRow]:
    """Every service (first run's order, then new ones) × (all prompts, then each prompt)."""
    getter, higher, words = METRICS[metric_name]
    svcs: list[str] = []
    pids: list[str] = []
    for lr in runs:
        svcs += [s for s in services(lr.run) if s not in svcs]
        pids += [p for p in prompt_ids(lr.run) if p not in pids]
    ref = runs[0]
    out: list[AlignedRow] = []
    for s in svcs:
        for p in [None, *pids]:
            ests: list[Estimate | None] = []
            deltas: list[Delta | None] = []
            verdicts: list[str] = []
            for i, lr in enumerate(runs):
                present = s in services(lr.run) and (p is None or p in prompt_ids(lr.run))
                ests.append(estimate(lr.run, s, p, getter) if present else None)
                if i == 0:
                    deltas.append(None)
                    verdicts.append("")
                    continue
                if not present or ests[0] is None:
                    deltas.append(None)
                    verdicts.append(f"only in {ref.label}" if ests[0] is not None else f"not in {ref.label}")
                    continue
                d = cross_run_delta(ref.run, lr.run, s, p, getter)
                deltas.append(d)
                verdicts.append(verdict(d, lr.label, higher, words))
            if all(e is None or e.n == 0 for e in ests) and p is not None:
                continue
            out.append(AlignedRow(service=s, prompt=p, estimates=ests, deltas=deltas, verdicts=verdicts))
    return out


def est_text(e: Estimate | None, fmt: str = "{:.1f}") -> str:
    """'141.6 ± 0.4 (n=3)' / '141.6 (n=1)' / '-'."""
    if e is None or e.value is None:
        return "-"
    hw = e.half_width
    core = fmt.format(e.value) + (f" ± {fmt.format(hw)}" if hw is not None else "")
    return f"{core} (n={e.n})"


def delta_text(d: Delta | None) -> str:
    if d is None or d.pct is None:
        return "-"
    return f"{fmt_pct(d.pct)} %"


def run_line(lr: LoadedRun) -> str:
    r = lr.run
    sp = r.sampling
    tags = [t for t, on in (("SIMULATED", lr.simulated), ("REPLAY telemetry", lr.replay)) if on]
    return (
        f"{lr.label} = {lr.path}: run {r.id}, {r.status}, {r.started_at:%Y-%m-%d %H:%M} UTC, prompts "
        f"{r.prompt_set}, repeats {r.repeats}, concurrency {r.concurrency}, max_new_tokens {sp.max_new_tokens}, "
        f"temperature {sp.temperature:g}" + (f" — {', '.join(tags)}" if tags else "")
    )


def within_run_verdicts(lr: LoadedRun) -> list[str]:
    """'local/ddtree-shadow vs local/dflash (baseline), tok/s: … ' for each non-baseline service: the run's
    stored Δ and interval (run_delta), the one every face prints."""
    run = lr.run
    if not run.baseline:
        return []
    out = []
    for s in services(run):
        for name, (_getter, higher, words) in METRICS.items():
            d = run_delta(run, s, name)
            if d is None:
                continue
            out.append(f"{s} vs {run.baseline} (baseline), {name}: {verdict(d, s, higher, words)}")
    return out


def comparison_table(runs: Sequence[LoadedRun]) -> str:
    """The aligned terminal table of several runs (tok/s, mean ± 95 % CI half-width, Δ vs the first run)."""
    lines = [run_line(lr) for lr in runs]
    ref = runs[0]
    for lr in runs[1:]:
        why = comparability(ref, lr)
        if why:
            lines.append(f"NOT COMPARABLE: {lr.label} vs {ref.label}: " + "; ".join(why))
        else:
            lines.append(f"{lr.label} vs {ref.label}: comparable (same sampling, models, prompts and load)")
    lines.append("")
    headers = ["service", "prompt"] + [f"{lr.label} tok/s" for lr in runs]
    for lr in runs[1:]:
        headers += [f"Δ {lr.label} vs {ref.label}", "95 % CI", "verdict"]
    body = []
    for row in aligned(runs):
        cells = [row.service, row.prompt or "(all)"] + [est_text(e) for e in row.estimates]
        for d, v in zip(row.deltas[1:], row.verdicts[1:], strict=True):
            ci = ci_text(d).removeprefix("95 % CI ") if d is not None else ""
            cells += [delta_text(d), ci or "-", v]
        body.append(cells)
    n = len(runs)
    right = (
        set(range(2, 2 + n)) | {2 + n + 3 * i for i in range(n - 1)} | {3 + n + 3 * i for i in range(n - 1)}
    )
    lines += render_table(headers, body, right)
    verdicts = [v for lr in runs for v in within_run_verdicts(lr)]
    if verdicts:
        lines.append("")
        lines.append("within each run (against its baseline, as the run stored it):")
        lines += [f"  {lr.label}: {v}" for lr in runs for v in within_run_verdicts(lr)]
    return "\n".join(lines) + "\n"


def single_run_text(lr: LoadedRun) -> str:
    """One run in the terminal: the bench table, then the verdicts against its baseline."""
    from ddtree_tui.bench import report

    text = report.table(lr.run)
    v = within_run_verdicts(lr)
    if v:
        text += "\nverdicts (95 % CI, as the run stored them):\n" + "".join(f"  {x}\n" for x in v)
    return text

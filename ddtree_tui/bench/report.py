"""Benchmark reports: a plain-text table, JSON (versioned schema) and CSV.

JSON schema (`--json FILE`, and each line of the history file), `"schema": 1`:

```
{
  "schema": 1,                      # bumped on any incompatible change
  "id": "3f2a9c1d0b7e",             # run id
  "status": "complete",             # or "interrupted" (Ctrl-C: what was measured so far)
  "started_at": "2026-11-29T18:07:27Z", "finished_at": "...", "wall_s": 12.3,
  "prompt_set": "seed3",            # seed3 | agentic | longctx | FILE.jsonl | custom
  "prompts": [{"id": "fibonacci", "title": "...", "approx_tokens": 40, "turns": 1, "max_new_tokens": null}],
  "sampling": {"max_new_tokens": 256, "temperature": 0.0, "ignore_eos": false, "api": "generate"},
  "repeats": 3, "warmup": 1, "concurrency": 1, "timeout": 300.0,
  "targets": [{"ref": "ct200/dflash", "base_url": "http://127.0.0.1:40123", "algorithm": "dflash",
               "mode": "linear", "speculative_algorithm": "DFLASH", "model_path": "...",
               "server_version": "0.5.23", "simulated": false}],
  "baseline": "ct200/dflash",       # deltas are relative to it; null: no deltas
  "order": ["ct200/dflash fibonacci #1", "ct200/ddtree-shadow fibonacci #1", ...],   # dispatch order
  "results": [                      # every counted request (warm-ups excluded)
    {"service": "ct200/dflash", "algorithm": "dflash", "mode": "linear", "prompt_id": "fibonacci",
     "repeat": 0, "seq": 0, "warmup": false, "started_at": 1795977917.2,
     "ok": true, "error": null,
     "ttft_s": 0.045, "e2e_s": 1.82, "server_e2e_s": 1.81, "output_tokens": 256, "prompt_tokens": 40, "cached_tokens": 0,
     "tok_s": 140.6,                # output_tokens / e2e_s
     "decode_tok_s": 143.9,         # tokens after the first text chunk / time after it
     "itl_mean_ms": 7.1, "itl_p50_ms": 7.0, "itl_p90_ms": 7.4, "itl_p99_ms": 9.0,   # per token
     "tokens_per_chunk": 3.4, "chunks": 75,
     "reads": 75, "coalesced_reads": 0,   # socket reads with chunks; of them, reads that held several
                                    # (ITL spreads a read's gap over its tokens: bench/metrics.py)
     "accept_length": 3.42,         # this request's meta_info (completion_tokens / spec_verify_ct)
     "accept_rate": 0.16, "spec_verify_ct": 75, "finish_reason": "length",
     "text_mode": "cumulative",     # detected: cumulative | incremental
     "tokens_source": "meta_info",  # meta_info | usage | chunks (chunks = server gave no count)
     "output_chars": 1402,
     "sampling": {"max_new_tokens": 256, "temperature": 0.0, "ignore_eos": false, "api": "generate"}}],
  "rows": [                         # one per prompt × service, repeats aggregated over successful ones
    {"prompt_id": "fibonacci", "service": "ct200/dflash", "algorithm": "dflash", "mode": "linear",
     "n": 3, "failed": 0, "tok_s_median": 140.6, "tok_s_min": 139.9, "tok_s_max": 141.0,
     "decode_tok_s_median": 143.9, "ttft_ms_median": 45.0, "ttft_ms_min": 44.1, "ttft_ms_max": 47.3,
     "e2e_s_median": 1.82, "output_tokens_median": 256, "accept_length_median": 3.42,
     "itl_ms_median": 7.0, "tokens_per_chunk_median": 3.4,
     "delta_tok_s_pct": null, "delta_ttft_pct": null}],        # % vs the baseline on the same prompt
  "summary": [{"service": "ct200/dflash", "algorithm": "dflash", "mode": "linear", "n": 9, "failed": 0,
               "tok_s_median": 110.2, "tok_s_mean_of_prompts": 115.5, "decode_tok_s_median": 113.0,
               "ttft_ms_median": 45.0, "accept_length_mean": 3.1, "output_tokens": 2304,
               "output_throughput": 108.7, "delta_tok_s_pct": null,
               "tok_s_mean": 115.6,        # mean over prompts of each prompt's mean tok/s: Δ's statistic
               "delta_tok_s_lo_pct": null, "delta_tok_s_hi_pct": null,  # Δ's 95 % CI (vs the baseline)
               "delta_n": null, "delta_method": null,  # bootstrap | t-paired (stats.delta_of_means)
               "delta_verdict": null}],    # "no measurable difference (Δ −0.7 %, 95 % CI …, n=9)"
  "failed": 0,                      # counted requests that failed
  "warmup_failed": 0,
  "requests_per_batch": 1, "prompts_cycled": false,   # fewer prompts than the concurrency: cycled
  "client": {"workers": 1, "cpu_s": 0.4, "cpu_core_max": 0.2, "loop_lag_ms_p99": 2.3, "cpu_us_per_token": 3.2,
             "client_bound": false, "reason": null, ...},   # the client's self-check (loadmon.py)
  "client_bound": false,            # true: the client limited the numbers, not the server
  "seed": null                      # workloads (issue 26): --seed of generated prompts (gsp:, sharegpt:)
}
```
Workloads (issue 26): `prompt_set` may also be `gsp:G,P,SYS,Q[,OUT]`, `sharegpt:FILE[,gpt-len]` or
`trace:FILE`; a `--load` / `--trace` run (schema 2) carries `workload` (bench/workloads/record.py: `seed`,
`prompts`, `arrival`, `max_concurrency`, `trace`, `schedules[]`, `cancel`, `cancels[]`, `cancelled[]`;
README, Workloads).
(summary rows also carry `request_throughput`, requests/s, and `reads` / `coalesced_reads`, summed over the
successful requests.)
Times are seconds unless the name says `_ms`; rates are tokens per second; a value that could not be
measured is null. Readers must ignore unknown keys (new keys do not bump the schema).

CSV (`--csv FILE`): one line per prompt × service with the columns of `rows` (CSV_COLUMNS), plus the run id
and the sampling parameters on every line.

Issue 26 (every run kind, shapes in bench/windows.py, README "Time slices, server metrics, …"): `slices`
(`--slice`: `width_s`, `basis`, `rows[]`), `server_metrics[]` (`--server-metrics`: `source` prometheus |
decode-log | none, `windows[]`), `cache_flushes[]` (`--flush-cache`), and on a load run `saturation_tests[]`;
`--slices-csv FILE` writes the slices joined with the server's windows (slices.iter_csv).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ddtree_tui.bench.models import BenchRun, PromptRow
from ddtree_tui.bench.tables import client_line, energy_text, reads_note

CSV_COLUMNS = [
    "run_id",
    "prompt_id",
    "service",
    "algorithm",
    "mode",
    "n",
    "failed",
    "tok_s_median",
    "tok_s_min",
    "tok_s_max",
    "decode_tok_s_median",
    "ttft_ms_median",
    "ttft_ms_min",
    "ttft_ms_max",
    "e2e_s_median",
    "output_tokens_median",
    "accept_length_median",
    "itl_ms_median",
    "tokens_per_chunk_median",
    "delta_tok_s_pct",
    "delta_ttft_pct",
    "max_new_tokens",
    "temperature",
    "ignore_eos",
    "api",
    "j_per_token",  # issue 26 (W-GPU): --energy, Σ attributed J / Σ output tokens of the row's requests
]


# what the summary's tok/s (mean) is: the footnote under the headless table and the TUI's glossary (`?`)
TOK_S_MEAN_NOTE = "mean over prompts of each prompt's mean tok/s"


def to_json(run: BenchRun, indent: int | None = 2) -> str:
    return b"".join(iter_json(run, indent)).decode("utf-8")


_HOLE = "\x00stream:{}\x00"  # where a top-level list goes; no dumped value can hold a raw NUL


def _dump(x: object, strict: bool, exclude: set[str] | None = None) -> Any:
    if not isinstance(x, BaseModel):
        return to_jsonable_python(x)
    if strict:  # pydantic's JSON rules (a non-finite float is null), as model_dump_json writes them
        return orjson.loads(x.model_dump_json(by_alias=True, exclude=exclude))
    return x.model_dump(mode="json", by_alias=True, exclude=exclude)


def iter_json(model: BaseModel, indent: int | None = 2, strict: bool = False) -> Iterator[bytes]:
    """The model's JSON (what json.dumps of its `model_dump(mode="json", by_alias=True)` writes; compact
    without `indent`; with `strict`, values as `model_dump_json` has them) in pieces: each top-level list is
    dumped one item at a time, so a run of a million results is written without its whole dump (several
    times its size) in memory at once."""
    fields = type(model).model_fields
    lists = [n for n in fields if isinstance(getattr(model, n), list) and getattr(model, n)]
    head = _dump(model, strict, set(lists))
    skeleton: dict[str, Any] = {}
    for name, f in fields.items():
        key = f.serialization_alias or f.alias or name
        if name in lists:
            skeleton[key] = _HOLE.format(name)
        elif key in head:
            skeleton[key] = head.pop(key)
    skeleton.update(head)  # anything else the dump holds, in its order
    seps = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(skeleton, indent=indent, ensure_ascii=False, separators=seps)
    pad = "" if indent is None else " " * indent
    nl = "" if indent is None else "\n"
    for name in lists:
        before, text = text.split(json.dumps(_HOLE.format(name)), 1)
        yield (before + "[").encode("utf-8")
        sep = nl + pad * 2
        for x in getattr(model, name):
            item = json.dumps(_dump(x, strict), indent=indent, ensure_ascii=False, separators=seps)
            yield (sep + (item.replace("\n", "\n" + pad * 2) if indent else item)).encode("utf-8")
            sep = "," + nl + pad * 2
        yield (nl + pad + "]").encode("utf-8")
    yield text.encode("utf-8")


def from_json(text: str) -> BenchRun:
    return BenchRun.model_validate_json(text)


def to_csv(run: BenchRun) -> str:
    return b"".join(iter_csv(run)).decode("utf-8")


def iter_csv(run: BenchRun) -> Iterator[bytes]:
    """`to_csv` a line at a time (the header, then one line per row)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    sp = run.sampling
    for row in run.rows:
        yield buf.getvalue().encode("utf-8")
        buf.seek(0)
        buf.truncate()
        d: dict[str, Any] = row.model_dump()
        d.update(
            run_id=run.id,
            max_new_tokens=sp.max_new_tokens,
            temperature=sp.temperature,
            ignore_eos=sp.ignore_eos,
            api=sp.api,
        )
        w.writerow({k: ("" if d.get(k) is None else d[k]) for k in CSV_COLUMNS})
    yield buf.getvalue().encode("utf-8")


def from_csv(text: str) -> list[PromptRow]:
    """The rows back from `to_csv` (for round trips and for tools that only keep the CSV)."""
    out = []
    fields = set(PromptRow.model_fields)
    for rec in csv.DictReader(io.StringIO(text)):
        out.append(
            PromptRow.model_validate({k: (v if v != "" else None) for k, v in rec.items() if k in fields})
        )
    return out


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def render_table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Aligned columns (those in `right` right-aligned) under a dashed rule: the terminal tables of a run and
    of a comparison of runs (report/compare.py) look alike."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def table(run: BenchRun) -> str:
    """Per prompt × service (tok/s median [min–max], decode tok/s, TTFT, accept length, Δ vs baseline),
    then per service; the mode of every service is on every line."""
    sp = run.sampling
    sim = any(t.simulated for t in run.targets)
    workers = run.client.workers if run.client else 1
    head = (
        f"bench {run.id} · {run.status} · prompts {run.prompt_set} · repeats {run.repeats} · warm-up "
        f"{run.warmup} · concurrency {run.concurrency}"
        + (f" · {workers} client workers" if workers > 1 else "")
        + f" · api {sp.api} · max_new_tokens {sp.max_new_tokens} · "
        f"temperature {sp.temperature:g} · ignore_eos {str(sp.ignore_eos).lower()}"
    )
    lines = [head]
    if run.prompts_cycled:
        lines.append(
            f"{len(run.prompts)} prompt(s) cycled to keep {run.requests_per_batch} requests in flight a batch"
        )
    if run.client_bound and run.client is not None:
        lines.append(
            f"CLIENT-BOUND: {run.client.reason} — the client, not the server, limited these numbers"
            + (" (try --workers N)" if workers == 1 else "")
        )
    if sim:
        names = ", ".join(t.ref for t in run.targets if t.simulated)
        lines.append(f"SIMULATED services (not real SGLang): {names}")
    if run.baseline:
        lines.append(f"baseline: {run.baseline}")
    lines.append("")
    headers = [
        "prompt",
        "service",
        "algorithm",
        "mode",
        "n",
        "tok/s",
        "[min-max]",
        "decode",
        "TTFT ms",
        "accept",
        "tok/chunk",
        "Δ tok/s",
    ]
    body = []
    for r in run.rows:
        rng = "-" if r.tok_s_min is None else f"[{r.tok_s_min:.1f}-{r.tok_s_max:.1f}]"
        body.append(
            [
                r.prompt_id,
                r.service,
                r.algorithm,
                r.mode or "-",
                f"{r.n}" + (f" ({r.failed} failed)" if r.failed else ""),
                _f(r.tok_s_median),
                rng,
                _f(r.decode_tok_s_median),
                _f(r.ttft_ms_median),
                _f(r.accept_length_median, "{:.2f}"),
                _f(r.tokens_per_chunk_median, "{:.2f}"),
                "base" if run.baseline == r.service else _pct(r.delta_tok_s_pct),
            ]
        )
    lines += render_table(headers, body, right={4, 5, 6, 7, 8, 9, 10, 11})
    lines.append("")
    headers = [
        "service",
        "algorithm",
        "mode",
        "ok",
        "failed",
        "tok/s (mean)",
        "median tok/s",
        "TTFT ms",
        "accept",
        "tokens",
        "out tok/s",
        "req/s",
        "Δ tok/s",
    ]
    body = []
    for s in run.summary:
        body.append(
            [
                s.service,
                s.algorithm,
                s.mode or "-",
                str(s.n),
                str(s.failed),
                _f(s.tok_s_mean if s.tok_s_mean is not None else s.tok_s_mean_of_prompts),
                _f(s.tok_s_median),
                _f(s.ttft_ms_median),
                _f(s.accept_length_mean, "{:.2f}"),
                str(s.output_tokens),
                _f(s.output_throughput),
                _f(s.request_throughput, "{:.2f}"),
                "base" if run.baseline == s.service else _pct(s.delta_tok_s_pct),
            ]
        )
    lines += render_table(headers, body, right={3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
    verdicts = [s for s in run.summary if s.delta_verdict and s.service != run.baseline]
    if verdicts:
        lines.append(f"tok/s (mean) = {TOK_S_MEAN_NOTE}; Δ is of that same number:")
        for s in verdicts:
            lines.append(f"  {s.service} vs {run.baseline}: {s.delta_verdict}")
    lines += reads_note((s.service, s.coalesced_reads, s.reads) for s in run.summary)
    if (cl := client_line(run.client)) is not None:
        lines.append(cl)
    lines += energy_lines(run)  # issue 26 (W-GPU)
    errors = [r for r in run.results if not r.ok]
    if errors:
        lines.append("")
        lines.append(f"{len(errors)} request(s) failed:")
        for bad in errors[:20]:
            lines.append(
                f"  {bad.service} ({bad.mode or '-'}) {bad.prompt_id} #{bad.repeat + 1}: {bad.error}"
            )
        if len(errors) > 20:
            lines.append(f"  … and {len(errors) - 20} more")
    return "\n".join(lines) + "\n"


# --- issue 26 (W-GPU): GPU energy under the table ---------------------------------------------------------------
def energy_lines(run: BenchRun) -> list[str]:
    """The run's energy as the JSON and HTML have it (--energy); nothing for a run without."""
    return energy_text(run.energy)

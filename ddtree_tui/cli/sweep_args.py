"""The `sweep` mode's options, apart from its handler (cli/sweep.py): building the parser of every
`ddtree-tui` command adds them, and importing the handler for that (the fleet, the sweep runner) cost each
command, a simulator child included, about half a second of CPU before it did anything."""

from __future__ import annotations

import argparse


def add_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "target", metavar="HOST/SVC|apply|show|report", help="the service to sweep, or apply/show/report DIR"
    )
    sp.add_argument(
        "dir", nargs="?", metavar="DIR", help="for apply/show/report: the sweep's --out directory"
    )
    sp.add_argument("--set", dest="sw_set", action="append", default=[], metavar="KEY=v1,v2",
                    help="a dimension: a service key, env.NAME or --flag, with its values")  # fmt: skip
    sp.add_argument("--preset", dest="sw_preset", metavar="NAME", help="a [[sweep]] of the host profile")
    sp.add_argument(
        "--load", dest="sw_load", metavar="concurrency:1,8", default=None, help="load levels per point"
    )
    sp.add_argument(
        "--prompts",
        dest="sw_prompts",
        default=None,
        metavar="SET|FILE.jsonl",
        help="prompt set (default seed3)",
    )
    sp.add_argument("--repeats", dest="sw_repeats", type=int, default=None, help="measured repeats per point")
    sp.add_argument("--warmup", dest="sw_warmup", type=int, default=1, help="unmeasured requests per point")
    sp.add_argument("--max-new-tokens", dest="sw_max_new", type=int, default=None, help="tokens per answer")
    sp.add_argument(
        "--strategy",
        dest="sw_strategy",
        choices=["grid", "one-at-a-time", "tpe", "nsga2"],
        default=None,
        help="all combinations, one dimension at a time, or chosen by Optuna: TPE (one objective) or "
        "NSGA-II (Pareto front of tok/s, throughput, TTFT p90) (default grid)",
    )
    sp.add_argument("--trials", dest="sw_trials", type=int, default=None, metavar="N",
                    help="tpe/nsga2: measure at most N configs (default: until every config is judged)")  # fmt: skip
    sp.add_argument("--seed", dest="sw_seed", type=int, default=0, help="the optimizer's seed (default 0)")
    sp.add_argument("--storage", dest="sw_storage", metavar="URL", default=None,
                    help="the study's database URL (default SQLite in --out; env DDTREE_TUI_SWEEP_STORAGE "
                    "keeps a password off the command line)")  # fmt: skip
    sp.add_argument("--worker", dest="sw_worker", action="append", default=[], metavar="HOST/SVC",
                    help="another service with the same model that measures points in parallel (repeatable)")  # fmt: skip
    sp.add_argument("--no-prune", dest="sw_no_prune", action="store_true",
                    help="measure every chosen point to the end (no median pruning)")  # fmt: skip
    sp.add_argument("--out", dest="sw_out", metavar="DIR", help="where the sweep's state and results go")
    sp.add_argument("--resume", dest="sw_resume", action="store_true", help="continue the sweep in --out")
    sp.add_argument("--redo", dest="sw_redo", type=int, action="append", default=[], metavar="N",
                    help="with --resume: measure point N again")  # fmt: skip
    sp.add_argument(
        "--redo-failed", dest="sw_redo_failed", action="store_true", help="with --resume: retry failed points"
    )
    sp.add_argument(
        "--max-time",
        dest="sw_max_time",
        type=float,
        default=None,
        metavar="S",
        help="stop starting points after S seconds",
    )
    sp.add_argument(
        "--objective",
        dest="sw_objective",
        choices=["tok_s", "goodput", "ttft"],
        default=None,
        help="what ranks the points (default tok_s)",
    )
    sp.add_argument("--constraint", dest="sw_constraint", action="append", default=None, metavar="EXPR",
                    help="e.g. ttft_p90<300ms (repeatable)")  # fmt: skip
    sp.add_argument("--baseline", dest="sw_baseline", metavar="HOST/SVC", help="a reference service")
    sp.add_argument("--baseline-every", dest="sw_baseline_every", type=int, default=3, metavar="N",
                    help="re-measure the profile's own config after every N configs (default 3)")  # fmt: skip
    sp.add_argument(
        "--point", dest="sw_point", type=int, default=None, help="apply: this point, not the best"
    )
    sp.add_argument(
        "--to", dest="sw_to", metavar="FILE", help="apply: this profile file (default: the swept one)"
    )
    sp.add_argument("--yes", dest="sw_yes", action="store_true", help="apply without asking")
    sp.add_argument(
        "--json", dest="sw_json", action="store_true", help="print results.json instead of the table"
    )
    sp.add_argument("--html", dest="sw_html", metavar="FILE",
                    help="also write a self-contained HTML report (at the end, also of a partial sweep)")  # fmt: skip
    sp.add_argument(
        "--no-telemetry", dest="sw_no_telemetry", action="store_true", help="do not record GPU telemetry"
    )
    add_schedule_arguments(sp)


def add_schedule_arguments(sp: argparse.ArgumentParser) -> None:
    """The schedule per concurrency and the fair arms (sweep/schedule.py, sweep/fairness.py)."""
    sp.add_argument("--levels", dest="sw_levels", metavar="1,4,16,64", default=None,
                    help="concurrency levels each point is measured at (= --load concurrency:1,4,16,64)")  # fmt: skip
    sp.add_argument("--schedule", dest="sw_schedule", action="store_true",
                    help="apply: one profile service per band of the schedule (NAME-c1-4, ...)")  # fmt: skip
    sp.add_argument("--dry-run", dest="sw_dry_run", action="store_true",
                    help="apply: show the diff, write nothing")  # fmt: skip
    sp.add_argument("--no-flush", dest="sw_no_flush", action="store_true",
                    help="do not POST /flush_cache before each measurement")  # fmt: skip
    sp.add_argument("--gpu-max-temp", dest="sw_gpu_max_temp", type=float, default=83.0, metavar="C",
                    help="wait before a measurement while a GPU is hotter than C °C (default 83)")  # fmt: skip
    sp.add_argument("--settle-timeout", dest="sw_settle", type=float, default=30.0, metavar="S",
                    help="wait at most S s for a hot or throttled GPU, then flag the point (default 30)")  # fmt: skip

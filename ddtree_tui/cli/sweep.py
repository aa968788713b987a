"""Headless tuning lab:

    ddtree-tui sweep HOST/SVC --set KEY=v1,v2 ... [--load concurrency:1,8] --out DIR [--resume] ...
    ddtree-tui sweep show DIR            # the table again (other --objective / --constraint allowed)
    ddtree-tui sweep apply DIR [--point N] [--yes]
    ddtree-tui sweep apply DIR --schedule [--yes]   # one profile service per band of the schedule
    ddtree-tui sweep report DIR [--html FILE]      # the HTML report (default DIR/report.html)

Exit 0: the sweep finished (or apply wrote the profile); 1: nothing measured, the service could not be put
back, or apply declined; 2: bad usage (the message names the --set, key and value).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Literal

from ddtree_tui.cli.args import SweepArgs
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError, handler, service_of
from ddtree_tui.config import HostProfile, ProfileError, SweepPreset, read_profile_text
from ddtree_tui.fleet import Fleet, ServiceHeld
from ddtree_tui.sweep import output
from ddtree_tui.sweep import results as rs
from ddtree_tui.sweep import state as st
from ddtree_tui.sweep.fairness import FairnessSettings
from ddtree_tui.sweep.runner import SweepRunner, SweepSettings
from ddtree_tui.sweep.spec import Dimension, SweepError, parse_constraint, parse_load, parse_set
from ddtree_tui.sweep.stopping import StopOnSignals


def _err(msg: str) -> None:
    with contextlib.suppress(OSError):  # the terminal closed (SIGHUP): the sweep still puts the service back
        print(msg, file=sys.stderr, flush=True)


def _out(text: str) -> None:
    with contextlib.suppress(OSError):
        print(text, flush=True)


# what a sweep writes into --out before its sweep.json exists (a temp file of it, the fleet's todo file)
_OWN_PREFIXES = (".sweep.json.", ".todos.json")


def check_out_dir(out: Path) -> str | None:
    """Why `out` may not take a new sweep (None: it may). A directory that already holds a sweep is the
    runner's to judge (--resume); one holding anything else is refused, because results.json and
    results.csv would replace the user's own files of those names."""
    if not out.exists() and not out.is_symlink():
        return None
    if not out.is_dir():
        return f"--out {out} exists and is not a directory"
    if (out / "sweep.json").exists():
        return None
    foreign = sorted(e.name for e in out.iterdir() if not e.name.startswith(_OWN_PREFIXES))
    if not foreign:
        return None
    shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    return (
        f"--out {out} already holds files this sweep did not write ({shown}); its results.json and "
        "results.csv would replace files of those names: give a new or empty directory"
    )


def _before(fleet: Fleet, ref: str) -> Literal["running", "stopped"]:
    """'stopped' when the service is not running before the sweep (put back stopped), else 'running'."""
    host, name = ref.split("/", 1)
    view = fleet.snapshot().host(host)
    svc = next((s for s in view.services if s.name == name), None) if view is not None else None
    return "stopped" if svc is not None and svc.state in ("stopped", "crashed") else "running"


async def _put_back_stopped(fleet: Fleet, state: st.SweepState) -> None:
    """The service was stopped before the sweep: the runner put the profile's config back; stop it again."""
    res = await fleet.kill(state.ref)
    state.restored = res.ok
    if not res.ok:
        state.caveats.append(f"could not stop the service again as it was before the sweep: {res.message}")


def write_results(out: Path, state: st.SweepState, ns: SweepArgs | None = None) -> rs.SweepResults:
    objective = ns.sw_objective if ns else None
    cons = ns.sw_constraint if ns else None
    return output.write_results(out, state, cons, objective)


def write_html(ns: SweepArgs, out: Path, state: st.SweepState, res: rs.SweepResults) -> bool:
    """`--html FILE`: the sweep's HTML report (report/sweep.py); False when it could not be written."""
    if not ns.sw_html:
        return True
    from ddtree_tui.report.sweep import html_for_state

    try:
        size = html_for_state(state, res, out, ns.sw_html)
    except OSError as e:
        _err(f"ddtree-tui sweep: cannot write {ns.sw_html}: {e.strerror or e}")
        return False
    _err(f"wrote {ns.sw_html} ({size / 1024:.0f} KiB)")
    return True


STORAGE_ENV = "DDTREE_TUI_SWEEP_STORAGE"  # the study's database URL, kept off argv (it may hold a password)


def _workers(ns: SweepArgs, ref: str) -> list[str]:
    """--worker HOST/SVC: more services measuring points of the same study (the swept one is always first)."""
    out: list[str] = []
    for w in ns.sw_worker:
        if "/" not in w:
            raise SweepError(f"--worker {w!r}: expected HOST/SVC")
        if w != ref and w not in out:
            out.append(w)
    if out and ns.sw_strategy not in ("grid", "tpe", "nsga2", None):
        raise SweepError("--worker: several workers share an Optuna study (--strategy grid, tpe or nsga2)")
    return out


def _dims(ns: SweepArgs, preset: SweepPreset | None) -> list[Dimension]:
    dims = [parse_set(s) for s in ns.sw_set]
    if preset is not None:
        have = {d.key for d in dims}
        for k, vals in preset.set.items():
            if k not in have:
                dims.append(
                    parse_set(
                        f"{k}={','.join(str(v).lower() if isinstance(v, bool) else str(v) for v in vals)}"
                    )
                )
    if not dims:
        raise SweepError(
            "no dimensions: give --set KEY=v1,v2 (or --preset NAME from the profile's [[sweep]])"
        )
    keys = [d.key for d in dims]
    if len(set(keys)) != len(keys):
        raise SweepError(f"a key is swept twice: {', '.join(keys)}")
    return dims


async def _sweep(ns: SweepArgs, profiles: list[HostProfile], settings: SweepSettings, out: Path) -> int:
    """The sweep, stopped (and its service put back) by SIGTERM, SIGHUP or SIGINT: sweep/stopping.py."""
    stop = asyncio.Event()

    def heard(name: str, n: int) -> None:
        if n == 1:
            _err(f"{name}: stopping the sweep; putting {settings.ref} back as it was first")
        else:
            _err(f"{name}: already stopping; {settings.ref} is being put back (SIGKILL abandons it)")

    with StopOnSignals(stop, heard) as sig:
        return await _sweep_until(ns, profiles, settings, out, sig)


async def _sweep_until(
    ns: SweepArgs,
    profiles: list[HostProfile],
    settings: SweepSettings,
    out: Path,
    sig: StopOnSignals,
) -> int:
    async with Fleet.open(
        profiles,
        todos_path=out / ".todos.json",
        history_path=out / "bench-history.jsonl",
        telemetry=not ns.sw_no_telemetry,
        probe_interval=0.5,
        auto_complete_todos=False,
    ) as fleet:
        await fleet.wait_settled(10.0)
        try:
            runner = SweepRunner(
                fleet, settings, out, resume=ns.sw_resume, redo=ns.sw_redo, redo_failed=ns.sw_redo_failed,
                on_event=lambda ev: _err(f"  #{ev.index if ev.index >= 0 else 'base'} {ev.label}: {ev.status}" + (f" ({ev.text})" if ev.text else "")),
                stop=sig.stop,
            )  # fmt: skip
        except SweepError as e:
            _err(f"ddtree-tui sweep: {e}")
            return EXIT_USAGE
        n, secs, how = runner.estimate()
        _err(
            f"sweep of {settings.ref}: {n} point(s) to measure, about {secs / 60:.1f} min ({how}); state in {out}"
        )
        if sig.name is not None:
            _err(f"stopped by {sig.name} before the sweep began; nothing was changed")
            return sig.exit_code or EXIT_FAIL
        # as it was before the sweep began: a resumed sweep keeps what its first run saw (run() saves it now)
        before = runner.state.service_before or _before(fleet, settings.ref)
        runner.state.service_before = before
        try:
            state = await runner.run()
        except ServiceHeld as e:
            _err(f"ddtree-tui sweep: {e}; nothing was done")
            return EXIT_FAIL
        if before == "stopped":
            await _put_back_stopped(fleet, state)
        state.stopped_by = sig.name
        st.save(state, out)
    res = write_results(out, state, ns)
    _out(res.model_dump_json(indent=1, by_alias=True) if ns.sw_json else rs.table(res, str(out)))
    _err(f"wall time {state.wall_s:.1f} s; results in {out}/results.json and results.csv")
    if sig.name is not None:
        back = {True: "put back", False: "NOT put back", None: "not known to be put back"}[state.restored]
        _err(
            f"interrupted: stopped by {sig.name}: {settings.ref} {back} ({before}); partial results in "
            f"{out}/results.json; continue with --resume"
        )
    if not write_html(ns, out, state, res) or state.restored is False or res.best is None:
        return sig.exit_code or EXIT_FAIL
    return sig.exit_code or EXIT_OK


def _load_dir(ns: SweepArgs, usage: str) -> st.SweepState | None:
    """The sweep directory named on the command line and its state; None (said on stderr) when there is none
    or it cannot be read."""
    if not ns.dir:
        _err(usage)
        return None
    out = Path(ns.dir)
    try:
        return st.load(out)
    except ValueError as e:
        _err(str(e))
        return None


def _write_confirmed(ns: SweepArgs, path: Path, old: str, new: str, what: str, question: str) -> int | None:
    """Show the diff of a profile edit, then write it (atomically) once allowed: `--yes`, or a "y" at a
    terminal; `--dry-run` writes nothing. The exit code when it stops here, None once written."""
    from ddtree_tui.sweep.apply import diff, write_profile

    d = diff(old, new, path)
    if not d:
        print(f"{path} already has {what}; nothing to write", flush=True)
        return EXIT_OK
    print(d, end="", flush=True)
    if ns.sw_dry_run:
        _err("dry run: nothing written")
        return EXIT_OK
    if not ns.sw_yes:
        if not sys.stdin.isatty():
            _err(
                "not a terminal: pass --yes to apply without asking (or --dry-run for the diff only); nothing written"
            )
            return EXIT_FAIL
        if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
            _err("nothing written")
            return EXIT_FAIL
    try:
        write_profile(path, new)
    except (OSError, SweepError) as e:
        _err(f"ddtree-tui sweep apply: {e}; nothing written")
        return EXIT_FAIL
    return None


def _apply(ns: SweepArgs) -> int:
    from ddtree_tui.sweep.apply import edit_profile_text

    state = _load_dir(ns, "usage: ddtree-tui sweep apply DIR [--point N]")
    if state is None:
        return EXIT_USAGE
    res = rs.analyse(state, ns.sw_constraint, ns.sw_objective)
    idx = ns.sw_point if ns.sw_point is not None else res.best
    if idx is None:
        _err("no point to apply: nothing was measured that meets the constraints (choose one with --point N)")
        return EXIT_FAIL
    rec = next((p for p in state.points if p.index == idx), None)
    if rec is None or rec.status != "done":
        _err(f"point {idx} was not measured ({rec.status if rec else 'no such point'}); not applied")
        return EXIT_USAGE
    path = Path(ns.sw_to or state.profile_source or "")
    if not ns.sw_to and not state.profile_source:
        _err("the sweep does not know its profile file; give --to FILE")
        return EXIT_USAGE
    try:
        old = read_profile_text(path)  # bounded: a 1 GB file is refused after 1 MiB, naming the file
        new = edit_profile_text(old, path, state.ref.split("/", 1)[1], rec.overrides)
    except (OSError, ProfileError, SweepError) as e:
        _err(f"ddtree-tui sweep apply: {e}")
        return EXIT_USAGE
    done = _write_confirmed(
        ns, path, old, new, f"point {idx}'s settings ({rec.label()})", f"write point {idx} into {path}?"
    )
    if done is not None:
        return done
    print(f"wrote point {idx} ({rec.label()}) into {path}", flush=True)
    redeploy = f"ddtree-tui --profile {path} restart {state.ref}"
    if ns.sw_yes or not sys.stdin.isatty():
        _err(f"redeploy with: {redeploy}")
        return EXIT_OK
    if input(f"redeploy {state.ref} now? [y/N] ").strip().lower() in ("y", "yes"):
        # the redeploy is the ordinary `restart` command, run as its own process (its own fleet, its own exit)
        import subprocess

        argv = [sys.executable, "-m", "ddtree_tui.cli", "--profile", str(path), "restart", state.ref]
        return subprocess.run(argv, check=False).returncode
    _err(f"not redeployed; later: {redeploy}")
    return EXIT_OK


def _apply_schedule(ns: SweepArgs) -> int:
    """`sweep apply DIR --schedule`: one profile service per band of the schedule, after the diff."""
    from ddtree_tui.sweep.apply import edit_profile_schedule

    state = _load_dir(ns, "usage: ddtree-tui sweep apply DIR --schedule [--to FILE] [--yes]")
    if state is None:
        return EXIT_USAGE
    sched = rs.analyse(state, ns.sw_constraint, ns.sw_objective).schedule
    if sched is None or not any(b.overrides for b in sched.bands):
        _err(
            "no band of the schedule has a setting to write (nothing stable beat the baseline); nothing written"
        )
        return EXIT_FAIL
    if not ns.sw_to and not state.profile_source:
        _err("the sweep does not know its profile file; give --to FILE")
        return EXIT_USAGE
    path = Path(ns.sw_to or state.profile_source or "")
    try:
        old = read_profile_text(path)
        new, bands = edit_profile_schedule(old, path, state.ref.split("/", 1)[1], sched.bands, state.id)
    except (OSError, ProfileError, SweepError) as e:
        _err(f"ddtree-tui sweep apply: {e}")
        return EXIT_USAGE
    for b in bands:
        what = f"{b.service} ({'new' if b.created else 'updated'}, port {b.port})" if b.service else "-"
        _err(f"  band {b.band}: {what}" + (f" — {b.note}" if b.note else ""))
    _err(f"crossover: {sched.crossover_text}")
    question = f"write {sum(1 for b in bands if b.service)} service(s) into {path}?"
    done = _write_confirmed(ns, path, old, new, "this schedule", question)
    if done is not None:
        return done
    names = [b.service for b in bands if b.service]
    print(f"wrote the schedule into {path}: {', '.join(names)}", flush=True)
    host = state.ref.split("/", 1)[0]
    _err("launch with: " + "; ".join(f"ddtree-tui --profile {path} launch {host}/{n}" for n in names))
    return EXIT_OK


def _loads(ns: SweepArgs, preset: SweepPreset | None) -> list[int]:
    """`--levels 1,4,16` is `--load concurrency:1,4,16`; giving both is a usage error."""
    if ns.sw_levels is not None:
        if ns.sw_load is not None:
            raise SweepError("give --levels or --load, not both (--levels 1,4 is --load concurrency:1,4)")
        return parse_load(f"concurrency:{ns.sw_levels}")
    return parse_load(ns.sw_load or (preset.load if preset else None))


def _report(ns: SweepArgs) -> int:
    """`sweep report DIR [--html FILE]`: the sweep's HTML report from its state (results re-analysed)."""
    if not ns.dir:
        _err("usage: ddtree-tui sweep report DIR [--html FILE]")
        return EXIT_USAGE
    out = Path(ns.dir)
    try:
        state = st.load(out)
        res = write_results(out, state, ns)
    except (ValueError, SweepError) as e:
        _err(str(e))
        return EXIT_USAGE
    ns = ns.model_copy(update={"sw_html": ns.sw_html or str(out / "report.html")})
    return EXIT_OK if write_html(ns, out, state, res) else EXIT_FAIL


@handler("sweep", SweepArgs)
def cli_main(ns: SweepArgs) -> int:
    if ns.target == "apply":
        return _apply_schedule(ns) if ns.sw_schedule else _apply(ns)
    if ns.target == "report":
        return _report(ns)
    if ns.target == "show":
        if not ns.dir:
            _err("usage: ddtree-tui sweep show DIR")
            return EXIT_USAGE
        try:
            state = st.load(Path(ns.dir))
            res = write_results(Path(ns.dir), state, ns)
        except (ValueError, SweepError) as e:
            _err(str(e))
            return EXIT_USAGE
        print(res.model_dump_json(indent=1, by_alias=True) if ns.sw_json else rs.table(res, ns.dir))
        print(rs.pareto_chart(res))
        return EXIT_OK if write_html(ns, Path(ns.dir), state, res) else EXIT_FAIL
    profiles, host, spec = service_of(ns, ns.target)
    preset = None
    if ns.sw_preset:
        preset = next((p for p in host.sweep if p.name == ns.sw_preset), None)
        if preset is None:
            names = ", ".join(p.name for p in host.sweep) or "none"
            raise UsageError(f"host '{host.name}' has no [[sweep]] named '{ns.sw_preset}' (known: {names})")
        if preset.service != spec.name:
            raise UsageError(
                f"[[sweep]] '{preset.name}' is for service '{preset.service}', not '{spec.name}'"
            )
    if not ns.sw_out:
        raise UsageError("give --out DIR: the sweep's checkpoint and results go there")
    try:
        settings = SweepSettings(
            ref=f"{host.name}/{spec.name}",
            dims=_dims(ns, preset),
            loads=_loads(ns, preset),
            strategy=ns.sw_strategy or (preset.strategy if preset else "grid"),
            prompts=ns.sw_prompts or (preset.prompts if preset else "seed3"),
            repeats=ns.sw_repeats or (preset.repeats if preset else 3),
            warmup=ns.sw_warmup,
            max_new_tokens=ns.sw_max_new or (preset.max_new_tokens if preset else 128),
            objective=ns.sw_objective or (preset.objective if preset else "tok_s"),
            constraints=ns.sw_constraint
            if ns.sw_constraint is not None
            else (list(preset.constraints) if preset else []),
            baseline_ref=ns.sw_baseline,
            baseline_every=max(1, ns.sw_baseline_every),
            fairness=FairnessSettings(
                flush=not ns.sw_no_flush,
                max_temp_c=ns.sw_gpu_max_temp if ns.sw_gpu_max_temp > 0 else None,
                settle_s=ns.sw_settle,
            ),
            max_time=ns.sw_max_time,
            seed=ns.sw_seed,
            trials=ns.sw_trials,
            storage=ns.sw_storage or os.environ.get(STORAGE_ENV) or None,
            workers=_workers(ns, f"{host.name}/{spec.name}"),
            prune=not ns.sw_no_prune,
        )
        for c in settings.constraints:
            parse_constraint(c)
    except (SweepError, ValueError) as e:
        _err(f"ddtree-tui sweep: {e}")
        return EXIT_USAGE
    out = Path(ns.sw_out)
    why = check_out_dir(out)
    if why is not None:
        _err(f"ddtree-tui sweep: {why}; nothing was done")
        return EXIT_USAGE
    try:
        return asyncio.run(_sweep(ns, profiles, settings, out))
    except KeyboardInterrupt:
        # Ctrl-C: the state is saved after every point; the results and report say what was measured
        try:
            state = st.load(out)
        except ValueError:
            raise KeyboardInterrupt from None
        res = write_results(out, state, ns)
        write_html(ns, out, state, res)
        _err(f"interrupted: partial results in {out}/results.json; continue with --resume")
        return 130

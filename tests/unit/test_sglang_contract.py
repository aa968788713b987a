"""The contract with real SGLang, from the fixtures scripts/gen_sglang_contract.py made from the release
wheels: every launch line we can emit parses with the recorded parser of the version the host reports, the
shipped profiles pass 0.5.23's, renames are known, and every recorded log-line variant parses by key."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from ddtree_tui.config import load_profile, parse_profile
from ddtree_tui.services import argcheck
from ddtree_tui.services.launchline import build_launch, ddtree_switches
from ddtree_tui.services.logs import parse_line

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "sglang"
SHIPPED = sorted((ROOT / "hostprofiles").glob("*.toml"))


def ddtree_flags_of(profile) -> set[str]:
    """The words a patched build adds (what [ddtree_flags] declares): not in any release's table."""
    f = profile.ddtree_flags
    return {w for w in (f.budget, f.shadow_linear, f.allow_hybrid_unsafe) if w and w.startswith("-")}


def release_args(profile, spec) -> list[str]:
    """The launch line minus the patched build's own DDTree words (and their values)."""
    args = argcheck.sglang_args(build_launch(profile, spec).argv) or []
    extra = ddtree_flags_of(profile)
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in extra:
            # a budget takes a value, a switch does not
            skip = a == profile.ddtree_flags.budget and i + 1 < len(args)
            continue
        out.append(a)
    return out


def test_flag_tables_are_real_releases() -> None:
    vs = argcheck.known_versions()
    assert {"0.5.19", "0.5.20", "0.5.23"} <= set(vs)
    t = argcheck.flag_table("0.5.23")
    assert t["generated_by"] == "scripts/gen_sglang_contract.py" and len(t["flags"]) > 400
    assert "torch" in t["stubbed"]  # read without torch
    flags = {f for a in t["flags"] for f in a["flags"]}
    assert "--mamba-radix-cache-strategy" in flags and "--mamba-scheduler-strategy" not in flags
    assert not any("ddtree" in f for f in flags)  # no release has DDTree


def test_rename_of_the_mamba_strategy_flag() -> None:
    r = argcheck.renames()["--mamba-scheduler-strategy"]
    assert (
        r["new"] == "--mamba-radix-cache-strategy"
        and r["last_seen"] == "0.5.19"
        and r["removed_in"] == "0.5.20"
    )
    old = ["--model-path", "/m", "--mamba-scheduler-strategy", "extra_buffer"]
    assert argcheck.check_offline(old, "0.5.19").ok
    bad = argcheck.check_offline(old, "0.5.23")
    assert bad.ok is False and bad.unknown == ["--mamba-scheduler-strategy"]
    assert "it is now --mamba-radix-cache-strategy (last accepted by 0.5.19, gone in 0.5.20)" in bad.summary()


def test_choices_are_checked() -> None:
    r = argcheck.check_offline(["--model-path", "/m", "--mamba-radix-cache-strategy", "extra"], "0.5.23")
    assert r.ok is False and r.bad_flag == "--mamba-radix-cache-strategy" and "invalid choice" in r.summary()
    assert argcheck.check_offline(["--model-path", "/m", "--attention-backend", "triton"], "0.5.23").ok


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_profiles_pass_the_real_parser(path: Path) -> None:
    prof = load_profile(path)
    for spec in prof.services:
        if spec.launcher != "sglang":
            continue
        res = argcheck.check_offline(release_args(prof, spec), "0.5.23")
        assert res.ok, f"{path.name} {spec.name}: {res.summary()}"
        assert "SGLANG_ENABLE_SPEC_V2" not in {**prof.env, **spec.env}  # read by nothing in 0.5.23


HOST = 'name = "h"\naddress = "h"\npython = "/py"\n'
BASE = 'name = "s"\nmodel = "/models/T"\ndraft_model = "/models/D"\nport = 30000\n'
OPTIONAL = [
    'attention_backend = "triton"\n',
    'draft_attention_backend = "fa4"\n',
    "block_size = 16\n",
    "mem_fraction_static = 0.75\n",
    'mamba_radix_cache_strategy = "extra_buffer"\n',
    'mamba_scheduler_strategy = "extra_buffer"\n',
    "trust_remote_code = false\n",
    'served_model_name = "qwen"\n',
    "enable_metrics = false\n",
    "tp_size = 2\n",
]
KINDS = [
    'algorithm = "baseline"\n',
    'algorithm = "dflash"\n',
    'algorithm = "ddtree"\nmode = "shadow-linear"\nbudget = 32\n',
    'algorithm = "ddtree"\nmode = "tree"\nbudget = 64\nallow_hybrid_unsafe = true\n',
]
DDTREE_HOST = '[ddtree_flags]\nshadow_linear = "--my-shadow"\nallow_hybrid_unsafe = "--my-unsafe"\n'


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
@pytest.mark.parametrize("kind", KINDS, ids=["baseline", "dflash", "ddtree-shadow", "ddtree-tree"])
def test_every_argv_we_can_emit_parses(kind: str, version: str) -> None:
    """Each algorithm with every optional field, one at a time and all together, against the recorded
    parser of a release that has the flags we emit (0.5.20 dropped the old strategy spelling)."""
    combos = [[o] for o in OPTIONAL] + [[o for o in OPTIONAL if "scheduler" not in o]] + [[]]
    for opts in combos:
        prof = parse_profile(HOST + DDTREE_HOST + "[[service]]\n" + BASE + kind + "".join(opts))
        spec = prof.services[0]
        res = argcheck.check_offline(release_args(prof, spec), version)
        assert res.ok, f"{opts}: {res.summary()}"
        if spec.algorithm == "ddtree":
            assert ddtree_switches(prof, spec)  # the patched build's switch is there


def test_version_lookup() -> None:
    assert argcheck.nearest_version("0.5.23") == "0.5.23"
    assert argcheck.nearest_version("0.5.22.post1") == "0.5.20"
    assert argcheck.nearest_version("0.5.24rc0") == "0.5.23"
    assert argcheck.nearest_version(None) == argcheck.known_versions()[-1]


LOGS = json.loads((FIX / "0.5.23" / "log_lines.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("i", range(len(LOGS["lines"])))
def test_every_recorded_log_line_parses_by_key(i: int) -> None:
    case = LOGS["lines"][i]
    m = parse_line(case["line"])
    assert m is not None, case["line"]
    for key, want in case["expect"].items():
        got = m.usage if key == "token_usage" else getattr(m, key)
        assert got == pytest.approx(want) if isinstance(want, float) else got == want, (key, case["line"])
    if case["prefix"] in ("ms", "multi_rank"):
        assert m.timestamp and "." in m.timestamp  # SGLANG_LOG_MS milliseconds kept


def test_multi_letter_ranks_are_read() -> None:
    line = next(c["line"] for c in LOGS["lines"] if "ATTN_CP1" in c["line"])
    m = parse_line(line)
    assert m is not None and (m.dp_rank, m.tp_rank) == (0, 2)
    assert m.ranks == {"DP": 0, "PP": 1, "ATTN_CP": 1, "MOE_DP": 0, "TP": 2, "EP": 2}


def test_all_prefix_variants_present() -> None:
    prefixes = {c["prefix"] for c in LOGS["lines"]}
    pools = {c["pool"] for c in LOGS["lines"]}
    assert prefixes == {"plain", "tp0", "dp_tp", "ms", "multi_rank", "ray"}
    assert pools == {"plain", "mamba", "swa", "swa+mamba"}
    assert list(itertools.islice((c for c in LOGS["lines"] if "Decode batch [1234]" in c["line"]), 1))

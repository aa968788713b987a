"""`sweep apply --schedule` (sweep/apply.py edit_profile_schedule and the CLI): one profile service per band,
every comment kept, the other services untouched, applying twice changes nothing, a dry run writes nothing,
and a bad profile is refused naming the file, the line and the field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ddtree_tui.config import ProfileError, parse_profile
from ddtree_tui.sweep import state as st
from ddtree_tui.sweep.apply import edit_profile_schedule
from ddtree_tui.sweep.schedule import Band
from tests.unit.test_sweep_schedule import state_of
from tests.util import cli_batch

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "hostprofiles" / "local-demo.toml").read_text()
TOPK = "env.SGLANG_DDTREE_MAX_TOPK"
BANDS = [
    Band(name="c1-8", levels=[1, 2, 4, 8], lo=1, hi=8, label="budget=16 topk=2", confidence=0.97,
         overrides={"mode": "tree", "budget": "16", TOPK: "2"}),
    Band(name="c16-32", levels=[16, 32], lo=16, hi=32, label="budget=8 topk=2", confidence=0.71,
         overrides={"mode": "tree", "budget": "8", TOPK: "2"}),
    Band(name="c64", levels=[64], lo=64, hi=64, label="baseline", use_baseline=True),
]  # fmt: skip


def comments(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("#")]


def test_one_service_per_band_with_comments_kept_and_a_round_trip() -> None:
    p = Path("local-demo.toml")
    new, done = edit_profile_schedule(DEMO, p, "ddtree-shadow", BANDS, "abc123")
    assert all(c in new for c in comments(DEMO))
    prof = parse_profile(new, p)
    old = parse_profile(DEMO, p)
    for s in old.services:  # the services that were there are exactly as they were
        assert prof.get_service(s.name) == s
    a, b = prof.get_service("ddtree-shadow-c1-8"), prof.get_service("ddtree-shadow-c16-32")
    assert a is not None and b is not None and prof.get_service("ddtree-shadow-c64") is None
    assert (a.mode, a.budget, a.env) == ("tree", 16, {"SGLANG_DDTREE_MAX_TOPK": "2"})
    assert (b.mode, b.budget, b.env) == ("tree", 8, {"SGLANG_DDTREE_MAX_TOPK": "2"})
    assert a.algorithm == "ddtree" and a.sim == old.get_service("ddtree-shadow").sim  # type: ignore[union-attr]
    ports = [s.port for s in prof.services]
    assert len(set(ports)) == len(ports)
    assert [d.service for d in done] == ["ddtree-shadow-c1-8", "ddtree-shadow-c16-32", None]
    assert done[2].note.startswith("run the baseline here")
    # the new services join the [[service]] tables, before the comment that opens the [[sweep]]
    assert new.index('name = "ddtree-shadow-c16-32"') < new.index("# A ready-made tuning-lab sweep")
    assert "band c1-8, concurrency 1..8: budget=16 topk=2, confidence 0.97" in new
    # applying the same schedule again changes nothing; a changed one updates the band services in place
    again, done2 = edit_profile_schedule(new, p, "ddtree-shadow", BANDS, "abc123")
    assert again == new and not any(d.created for d in done2)
    moved = [BANDS[0].model_copy(update={"overrides": {"mode": "tree", "budget": "32", TOPK: "4"}})]
    third, _ = edit_profile_schedule(new, p, "ddtree-shadow", moved, "abc123")
    c = parse_profile(third, p).get_service("ddtree-shadow-c1-8")
    assert c is not None and (c.budget, c.env["SGLANG_DDTREE_MAX_TOPK"], c.port) == (32, "4", a.port)
    assert len(third.splitlines()) == len(new.splitlines())


def test_a_bad_profile_is_refused_naming_file_line_and_field() -> None:
    bad = DEMO.replace("budget = 32", "budget = -5")
    line = bad.splitlines().index("budget = -5") + 1
    with pytest.raises(ProfileError) as e:
        edit_profile_schedule(bad, Path("prof.toml"), "ddtree-shadow", BANDS, "x")
    assert f"prof.toml:{line}" in str(e.value) and "service[1].budget" in str(e.value)


@pytest.mark.slow
def test_cli_dry_run_then_apply_then_nothing_to_write(tmp_path: Path) -> None:
    prof = tmp_path / "local-demo.toml"
    prof.write_text(DEMO)
    state = state_of(0, noise=0.005, levels=[1, 4, 64], grid=[(16, 2), (8, 2), (4, 1)])
    state.ref, state.profile_source = "local/ddtree-shadow", str(prof)
    out = tmp_path / "sweep"
    st.save(state, out)

    def apply(*extras: list[str]) -> list[subprocess.CompletedProcess[str]]:
        """`sweep apply DIR --schedule EXTRA...` for each of `extras`, in one child process (tests/cli_batch.py:
        the imports paid once); its stdin is a pipe, not a terminal."""
        return cli_batch([["sweep", "apply", str(out), "--schedule", *e] for e in extras], tmp_path)

    # a dry run, then neither a terminal nor --yes: nothing written by either
    dry, no = apply(["--dry-run"], [])
    assert dry.returncode == 0, dry.stderr
    assert '+name = "ddtree-shadow-c1-4"' in dry.stdout and "dry run: nothing written" in dry.stderr
    assert "from c=64 on run the baseline" in dry.stderr
    assert no.returncode == 1 and prof.read_text() == DEMO
    (yes,) = apply(["--yes"])
    assert yes.returncode == 0, yes.stderr
    assert "ddtree-shadow-c1-4" in yes.stdout and "launch local/ddtree-shadow-c1-4" in yes.stderr
    written = prof.read_text()
    assert all(c in written for c in comments(DEMO))
    band = parse_profile(written, prof).get_service("ddtree-shadow-c1-4")
    assert band is not None and (band.budget, band.env) == (16, {"SGLANG_DDTREE_MAX_TOPK": "2"})
    (twice,) = apply(["--yes"])  # nothing left to write
    assert twice.returncode == 0 and "already has this schedule" in twice.stdout
    assert prof.read_text() == written

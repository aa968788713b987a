"""Patch sets: diff parsing, apply/revert round trip on a temp package through LocalTransport, conflict
reporting, version ranges, and the shipped set against its own manifest."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui import cli
from ddtree_tui.config import parse_profile
from ddtree_tui.services.patches import (
    PatchError,
    apply_hunks,
    apply_patch,
    list_patch_sets,
    load_patch_set,
    parse_diff,
    patch_status,
    revert_patch,
    version_matches,
)
from ddtree_tui.transport.local import LocalTransport

ORIG = "".join(f"line {i}\n" for i in range(1, 41))
REPO = Path(__file__).resolve().parents[2]


def _make_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """site/ holds package `fakepkg` 1.2.3 (with dist-info); patches/ holds set `p1` made by diff -u."""
    site = tmp_path / "site"
    pkg = site / "fakepkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text(ORIG)
    (pkg / "other.py").write_text("a = 1\nb = 2\n")
    di = site / "fakepkg-1.2.3.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.2.3\n")
    new_mod = ORIG.replace("line 5\n", "line 5\nINSERTED\n").replace("line 30\n", "CHANGED 30\n")
    a, b = tmp_path / "a", tmp_path / "b"
    for root, mod, other in ((a, ORIG, "a = 1\nb = 2\n"), (b, new_mod, "a = 1\nb = 3\n")):
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "mod.py").write_text(mod)
        (root / "other.py").write_text(other)
    diff = subprocess.run(["diff", "-ru", "a", "b"], cwd=tmp_path, capture_output=True, text=True).stdout
    pset = tmp_path / "patches" / "p1"
    pset.mkdir(parents=True)
    (pset / "change.diff").write_text(diff)
    (pset / "manifest.toml").write_text(
        'package = "fakepkg"\nversion = ">=1.2,<1.3"\ndescription = "test set"\nfiles = ["change.diff"]\n'
    )
    return site, pkg, pset


def _profile(tmp_path: Path, site: Path):
    return parse_profile(
        f'name = "loc"\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{tmp_path / "wd"}"\n'
        f'[env]\nPYTHONPATH = "{site}"\n'
    )


async def test_apply_revert_round_trip(tmp_path: Path) -> None:
    site, pkg, pset = _make_tree(tmp_path)
    ps = load_patch_set(pset)
    assert [d.path for d in ps.diffs] == ["other.py", "sub/mod.py"]
    prof = _profile(tmp_path, site)
    t = LocalTransport(prof)
    await t.start()
    st = await patch_status(t, prof, ps)
    assert st.ok and st.version == "1.2.3" and st.version_ok and st.package_dir == str(pkg)
    assert [f.state for f in st.files] == ["not applied", "not applied"]
    r = await apply_patch(t, prof, ps)
    assert r.ok, r.message
    assert (pkg / "sub" / "mod.py").read_text() == (tmp_path / "b" / "sub" / "mod.py").read_text()
    assert (pkg / "other.py").read_text() == "a = 1\nb = 3\n"
    assert (tmp_path / "wd" / "patches" / "p1" / "backup" / "sub" / "mod.py").read_text() == ORIG
    st = await patch_status(t, prof, ps)
    assert [f.state for f in st.files] == ["applied", "applied"] and "applied" in st.message
    again = await apply_patch(t, prof, ps)
    assert again.ok and "already applied" in again.message
    rv = await revert_patch(t, prof, ps)
    assert rv.ok and all(f.detail == "restored from backup" for f in rv.files)
    assert (pkg / "sub" / "mod.py").read_text() == ORIG and (pkg / "other.py").read_text() == "a = 1\nb = 2\n"
    assert not (tmp_path / "wd" / "patches" / "p1" / "state.json").exists()
    # revert without a backup (workdir wiped) reverse-applies the diff exactly
    assert (await apply_patch(t, prof, ps)).ok
    shutil.rmtree(tmp_path / "wd")
    rv = await revert_patch(t, prof, ps)
    assert rv.ok and all("reverse-applied" in (f.detail or "") for f in rv.files)
    assert (pkg / "sub" / "mod.py").read_text() == ORIG


async def test_conflict_reported_and_nothing_written(tmp_path: Path) -> None:
    site, pkg, pset = _make_tree(tmp_path)
    ps = load_patch_set(pset)
    prof = _profile(tmp_path, site)
    t = LocalTransport(prof)
    await t.start()
    (pkg / "sub" / "mod.py").write_text(ORIG.replace("line 30\n", "SOMEONE ELSE 30\n"))
    st = await patch_status(t, prof, ps)
    assert not st.ok
    assert {f.path: f.state for f in st.files} == {"other.py": "not applied", "sub/mod.py": "conflict"}
    r = await apply_patch(t, prof, ps)
    assert not r.ok and "sub/mod.py conflict" in r.message and "nothing was written" in r.message
    assert (pkg / "other.py").read_text() == "a = 1\nb = 2\n"  # untouched
    # a file edited after apply: revert refuses rather than clobber it
    (pkg / "sub" / "mod.py").write_text(ORIG)
    assert (await apply_patch(t, prof, ps)).ok
    (pkg / "sub" / "mod.py").write_text(
        (pkg / "sub" / "mod.py").read_text().replace("INSERTED\n", "EDITED\n")
    )
    rv = await revert_patch(t, prof, ps)
    assert not rv.ok and {f.path: f.state for f in rv.files}["sub/mod.py"] == "conflict"


async def test_version_out_of_range_and_missing_package(tmp_path: Path) -> None:
    site, _pkg, pset = _make_tree(tmp_path)
    (pset / "manifest.toml").write_text('package = "fakepkg"\nversion = ">=2"\nfiles = ["change.diff"]\n')
    prof = _profile(tmp_path, site)
    t = LocalTransport(prof)
    await t.start()
    r = await apply_patch(t, prof, load_patch_set(pset))
    assert not r.ok and "outside '>=2'" in r.message
    (pset / "manifest.toml").write_text('package = "nopkg_xyz"\nfiles = ["change.diff"]\n')
    r = await patch_status(t, prof, load_patch_set(pset))
    assert not r.ok and "not found" in r.message


def test_version_matches() -> None:
    assert version_matches("0.5.23", ">=0.5.23,<0.5.24")
    assert not version_matches("0.5.24", ">=0.5.23,<0.5.24")
    assert version_matches("0.5.23.post1", "==0.5.23")
    assert version_matches("1.0", "==1.0.0") and version_matches("anything", "")
    assert version_matches("1.4.2", "~=1.4") and not version_matches("2.0", "~=1.4")
    with pytest.raises(PatchError):
        version_matches("1.0", "=> 1")


def test_parse_diff_errors_and_offsets() -> None:
    with pytest.raises(PatchError):
        parse_diff("not a diff\n")
    d = parse_diff("--- a/x.py\n+++ b/x.py\n@@ -2,3 +2,3 @@\n a\n-b\n+B\n c\n")[0]
    # the context found a few lines away from the header's line number still applies
    assert apply_hunks("z\nz\nz\nz\na\nb\nc\n", d) == "z\nz\nz\nz\na\nB\nc\n"
    assert apply_hunks("a\nx\nc\n", d) is None


def test_shipped_patch_sets_load_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sets = list_patch_sets(REPO / "patches")
    names = [s.name for s in sets]
    assert "decode-log-spec-algo" in names
    ps = next(s for s in sets if s.name == "decode-log-spec-algo")
    assert ps.manifest.package == "sglang" and version_matches("0.5.23", ps.manifest.version)
    assert ps.diffs[0].path == "srt/managers/scheduler_components/metrics_reporter.py"
    assert any("spec algo" in line for h in ps.diffs[0].hunks for line in h.new)
    assert cli.main(["patches", "list", "--patches-dir", str(REPO / "patches")]) == 0
    assert "decode-log-spec-algo" in capsys.readouterr().out
    site, _pkg, pset = _make_tree(tmp_path)
    pf = tmp_path / "loc.toml"
    pf.write_text(
        f'name = "loc"\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{tmp_path / "wd"}"\n'
        f'[env]\nPYTHONPATH = "{site}"\n'
    )
    pd = str(pset.parent)
    assert cli.main(["patches", "apply", "loc", "p1", "--patches-dir", pd, "--profile", str(pf)]) == 0
    assert "applied p1 on loc" in capsys.readouterr().out
    assert cli.main(["patches", "status", "loc", "--patches-dir", pd, "--profile", str(pf)]) == 0
    assert "p1 on loc: applied" in capsys.readouterr().out
    assert cli.main(["patches", "revert", "loc", "p1", "--patches-dir", pd, "--profile", str(pf)]) == 0
    assert cli.main(["patches", "apply", "loc", "nope", "--patches-dir", pd, "--profile", str(pf)]) == 2
    assert cli.main(["patches", "apply", "loc", "--patches-dir", pd, "--profile", str(pf)]) == 2
    assert cli.main(["patches", "status", "zz", "--patches-dir", pd, "--profile", str(pf)]) == 2

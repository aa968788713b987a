"""lib/paths.py is the one place a default path is written (issue 24: `.ddtree/` was hard-coded in five)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddtree_tui.lib import paths

PKG = Path(__file__).resolve().parents[2] / "ddtree_tui"
HARD_CODED = re.compile(r"""Path\(\s*["']\.ddtree|platformdirs\.user_\w+_dir\(""")


def test_no_module_but_paths_names_a_default_directory() -> None:
    found = [
        f"{p.relative_to(PKG)}:{n}"
        for p in sorted(PKG.rglob("*.py"))
        if p != PKG / "lib" / "paths.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if HARD_CODED.search(line)
    ]
    assert found == []


def test_project_paths_are_relative_and_user_paths_are_not() -> None:
    for p in (paths.BENCH_HISTORY, paths.TODOS, paths.COLLECTOR_TOKEN, paths.SWEEPS, paths.SAVED_LOGS):
        assert not p.is_absolute() and p.parts[0] == ".ddtree"
    assert paths.user_profiles_dir().is_absolute() and paths.user_profiles_dir().name == "hostprofiles"


def test_holds_follow_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(paths.HOLDS_ENV, str(tmp_path / "h"))
    assert paths.holds_dir() == tmp_path / "h"
    monkeypatch.delenv(paths.HOLDS_ENV)
    assert paths.holds_dir().is_absolute() and paths.holds_dir().name == "holds"

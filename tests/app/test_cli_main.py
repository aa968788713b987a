"""cli_main's contract: a broken profile or an unknown theme is a usage error (exit 2) with a message that
names the problem, before any terminal is taken over."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ddtree_tui.cli.tui import cli_main
from ddtree_tui.ui.skins import discover_themes


def _ns(**kw: object) -> argparse.Namespace:
    base = {"profile": None, "profiles": None, "todos": None, "theme": None, "demo": False}
    base.update(kw)
    return argparse.Namespace(**base)


def test_bad_profile_exits_2_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[service]]\nname = "a"\nport = 99999\nlauncher = "sim"\n')
    assert cli_main(_ns(profile=[str(bad)])) == 2
    err = capsys.readouterr().err
    assert "bad.toml:4" in err and "port" in err


def test_unknown_theme_exits_2_listing_themes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(_ns(demo=True, theme="neon")) == 2
    err = capsys.readouterr().err
    assert "neon" in err and "high-contrast" in err


def test_shipped_themes() -> None:
    themes = discover_themes()
    assert {"dark", "light", "high-contrast"} <= set(themes)
    assert themes["light"][1] == "textual-light"


def test_first_run_without_profiles_says_how_and_offers_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ddtree_tui.cli.tui import first_run

    monkeypatch.chdir(tmp_path)  # no ./hostprofiles
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))  # and no user profiles
    assert cli_main(_ns()) == 2  # not a terminal: the advice, and a usage exit
    err = capsys.readouterr().err
    assert "no host profiles found" in err and "ddtree-tui --demo" in err and "hostprofiles/README.md" in err
    assert first_run(True, answer="y") == "demo"
    assert first_run(True, answer="") is None

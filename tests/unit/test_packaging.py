"""A non-editable install has no repo root: the build hook (setup.py) must put the themes and the demo
profile inside the package, where the lookups find them, and the sdist must carry their sources."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
THEMES = {"dark", "light", "high-contrast"}


def _setup_module() -> ModuleType:
    """setup.py imported (not run): its `setup()` call only runs as __main__."""
    spec = importlib.util.spec_from_file_location("ddtree_setup_hook", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PROBE = """
import importlib.resources, json, ddtree_tui
from ddtree_tui.config import load_profiles, packaged_demo_profile
from ddtree_tui.ui.skins import discover_themes, themes_dir
res = importlib.resources.files("ddtree_tui")
demo = packaged_demo_profile()
print(json.dumps({
    "package": ddtree_tui.__file__,
    "themes_dir": str(themes_dir()),
    "themes": {k: [str(p), base] for k, (p, base) in discover_themes().items()},
    "demo": str(demo),
    "demo_services": [s.name for s in load_profiles([demo])[0].service],
    "resources": sorted(p.name for p in res.joinpath("ui", "themes").iterdir() if p.name.endswith(".tcss")),
    "resource_demo": res.joinpath("data", "local-demo.toml").is_file(),
}))
"""


def test_installed_layout_finds_themes_and_demo(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(ROOT / "ddtree_tui", site / "ddtree_tui", ignore=shutil.ignore_patterns("__pycache__"))
    assert not (site / "ddtree_tui" / "ui" / "themes").exists()  # git holds each file once, at the root
    copied = _setup_module().bundle(site)
    assert {p.name for p in copied} == {f"{t}.tcss" for t in THEMES} | {"local-demo.toml"}
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    p = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=run_dir, env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    pkg = site / "ddtree_tui"
    assert Path(got["package"]).parent == pkg  # the copy, not the checkout
    assert Path(got["themes_dir"]) == pkg / "ui" / "themes"
    assert set(got["themes"]) == THEMES
    assert all(Path(path).parent == pkg / "ui" / "themes" for path, _ in got["themes"].values())
    assert got["themes"]["light"][1] == "textual-light"
    assert Path(got["demo"]) == pkg / "data" / "local-demo.toml"
    assert got["demo_services"] == ["dflash", "ddtree-shadow"]
    assert got["resources"] == sorted(f"{t}.tcss" for t in THEMES) and got["resource_demo"] is True


def test_bundle_fails_loudly_without_sources(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="themes"):
        _setup_module().bundle(tmp_path / "out", src_root=tmp_path)


def test_sdist_manifest_carries_bundled_sources() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text().split("\n")
    for pattern, _ in _setup_module().BUNDLED:
        assert f"include {pattern}" in manifest
        assert list(ROOT.glob(pattern)), pattern

"""Build hook: the wheel carries themes/*.tcss and hostprofiles/local-demo.toml inside the package.

Each file lives once in git, where DESIGN.md puts it (themes/, hostprofiles/): a checkout and an editable
install read it there. A built wheel (`pip install .`) has no repo root, so build_py copies the files to
ddtree_tui/ui/themes/ and ddtree_tui/data/, where `ddtree_tui.ui.skins.themes_dir()` and
`ddtree_tui.config.packaged_demo_profile()` look next. All other metadata is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

# (a glob under the repo root, the folder inside the built package tree it goes to)
BUNDLED: tuple[tuple[str, str], ...] = (
    ("themes/*.tcss", "ddtree_tui/ui/themes"),
    ("hostprofiles/local-demo.toml", "ddtree_tui/data"),
)


def bundle(build_lib: Path, src_root: Path = ROOT) -> list[Path]:
    """Copy the bundled files into a package tree at `build_lib`; a missing source fails the build, so a
    wheel never silently ships without its themes or demo profile."""
    out: list[Path] = []
    for pattern, dest in BUNDLED:
        files = sorted(src_root.glob(pattern))
        if not files:
            raise FileNotFoundError(f"nothing matches {pattern} under {src_root}: the package would lack it")
        target = Path(build_lib) / dest
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(f, target / f.name)
            out.append(target / f.name)
    return out


class BuildPyBundled(build_py):
    """build_py, plus the bundled files (not for editable installs: they read the checkout)."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            bundle(Path(self.build_lib))


if __name__ == "__main__":  # setuptools.build_meta runs this file as __main__; tests import bundle()
    setup(cmdclass={"build_py": BuildPyBundled})

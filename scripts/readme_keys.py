"""Rewrite README's key table (between `<!-- keys:start -->` and `<!-- keys:end -->`) from the bindings, after
a key changes: `.venv/bin/python scripts/readme_keys.py`. tests/app/test_keys.py fails until it is run."""

from __future__ import annotations

from pathlib import Path

from ddtree_tui.atomicio import write_file
from ddtree_tui.ui.app import DDTreeApp
from ddtree_tui.ui.screens.help import readme_key_table

START, END = "<!-- keys:start -->\n", "<!-- keys:end -->"


def main() -> int:
    path = Path(__file__).resolve().parents[1] / "README.md"
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    write_file(path, head + START + readme_key_table(DDTreeApp) + END + tail)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

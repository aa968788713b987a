"""Prints the architecture counts issue 12 tracks: the five largest modules, `Any` uses, getattr/hasattr sites,
programs in string literals (via the test), modules over 600 lines, and mypy errors with the debt list removed.

Run: .venv/bin/python scripts/arch_counts.py [--mypy]
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ddtree_tui"


def modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def count_any(src: str) -> int:
    tree = ast.parse(src)
    names = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "Any")
    strings = (
        sum(  # `from __future__ import annotations` keeps annotations as code, but quoted ones count too
            len(re.findall(r"\bAny\b", n.value))
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and len(n.value) < 80
            and "[" in n.value
        )
    )
    return names + strings


def _mentions_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.search(r"\bAny\b", node.value) is not None
    return any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(node))


def public_any(src: str) -> int:
    """Signatures of public functions and methods (what another package may call) that name `Any` in a
    parameter or the return: issue 24's "no Any across a package boundary"."""
    tree = ast.parse(src)
    n = 0

    def visit(body: list[ast.stmt], public: bool) -> None:
        nonlocal n
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, public and not node.name.startswith("_"))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = node.name
                if not public or (name.startswith("_") and not name.startswith("__")):
                    continue
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                if _mentions_any(node.returns) or any(
                    p is not None and _mentions_any(p.annotation) for p in params
                ):
                    n += 1

    visit(tree.body, True)
    return n


def count_calls(src: str, names: set[str]) -> int:
    tree = ast.parse(src)
    return sum(
        1
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names
    )


def mypy_errors() -> str:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    keep = {k: v for k, v in cfg.items() if k != "overrides"}
    lines = ["[mypy]"] + [f"{k} = {', '.join(v) if isinstance(v, list) else str(v)}" for k, v in keep.items()]
    remote = [o for o in cfg.get("overrides", []) if o.get("disallow_untyped_defs") is False]
    for o in remote:  # host programs: untyped on purpose (Python 3.6 on the host)
        for m in o["module"]:
            lines += [f"[mypy-{m}]", "disallow_untyped_defs = False", "disallow_incomplete_defs = False"]
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    out = (
        subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", f.name], cwd=ROOT, capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()
    )
    return out[-1] if out else "?"


def main() -> int:
    rows = []
    any_n = ga_n = pub_any = 0
    fleet_max = (0, "")
    for p in modules():
        src = p.read_text()
        rows.append((len(src.splitlines()), str(p.relative_to(ROOT))))
        if p.parent.name == "fleet" and p.parent.parent == PKG:
            fleet_max = max(fleet_max, rows[-1])
        any_n += count_any(src)
        if (
            "remote" not in p.relative_to(PKG).parts
        ):  # host programs: stdlib JSON in and out, untyped on purpose
            pub_any += public_any(src)
        ga_n += count_calls(src, {"getattr", "hasattr"})
    rows.sort(reverse=True)
    print("| measure | value |\n|---|---|")
    for n, name in rows[:5]:
        print(f"| lines: {name} | {n} |")
    print(f"| modules over 600 lines | {sum(1 for n, _ in rows if n > 600)} |")
    print(f"| `Any` (names in the AST) | {any_n} |")
    print(f"| public signatures naming `Any` (outside remote/) | {pub_any} |")
    if fleet_max[0]:
        print(f"| largest module of fleet/ | {fleet_max[1]} {fleet_max[0]} |")
    print(f"| getattr/hasattr calls | {ga_n} |")
    if "--mypy" in sys.argv:
        print(f"| mypy without the debt list | {mypy_errors()} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Prints the architecture counts issue 12 tracks: the five largest modules, `Any` uses, getattr/hasattr sites,
programs in string literals (via the test), modules over 600 lines, and mypy errors with the debt list removed.

Run: .venv/bin/python scripts/arch_counts.py [--mypy] [--any]   (--any: every public signature naming `Any`,
with why it is still there)
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


# Public signatures that still name `Any`, by "module:qualified name", and why. ALLOWED: the `Any` is a
# third-party API's (its hook or override is typed so); OPEN: could be typed, with what would do it. A new
# one is neither: the count says so.
ALLOWED = {
    "model/ref.py:ServiceRef.__get_pydantic_core_schema__": "pydantic's hook: its source type is typed Any",
    "ui/theming.py:ThemeSwitch.get_system_commands": "overrides Textual's App.get_system_commands(screen: Screen[Any])",
    "sweep/workers.py:StudySettings.model_copy": "mirrors pydantic's BaseModel.model_copy(update: Mapping[str, Any])",
    "ui/widgets/base.py:Pane.__init__": "keywords passed on to Textual's Widget.__init__",
    "ui/widgets/bench.py:BenchPane.__init__": "keywords passed on to Textual's Widget.__init__",
    "ui/widgets/table.py:TablePane.__init__": "keywords passed on to Textual's Widget.__init__",
    "ui/navigation.py:move": "Textual's App is generic in its return value: any app",
    "ui/screens/help.py:main_groups": "Textual's App is generic in its return value: any app class",
    "ui/screens/help.py:help_groups": "Textual's App and Screen are generic in their return values",
    "ui/screens/help.py:readme_key_table": "Textual's App is generic in its return value: any app class",
    "ui/widgets/base.py:KeyedTable.__init__": "keywords passed on to Textual's DataTable.__init__",
    "ui/widgets/logs.py:TailLog.write": "arguments passed on to Textual's RichLog.write (its content is typed Any)",
    "ui/widgets/base.py:drop_stale_renders": "Textual's DataTable is generic in its cell type: any table",
    # RecordingFleet wraps whichever fleet a mode runs (Fleet, the TUI's, the collector's) and must answer
    # every attribute the wrapped one has, including the optional ones the faces probe with runtime-checkable
    # protocols (LoadShaper, SettlingFleet, SweepFleet, FrozenFleet, ...): a method per attribute would either drop
    # those or claim them for fleets that lack them. Python's data model types __getattr__'s result as Any.
    "collector/recording.py:RecordingFleet.__getattr__": "Python's __getattr__ protocol: a transparent "
    "proxy's attributes are the wrapped fleet's, whatever they are",
}
OPEN: dict[str, str] = {}


def public_any(src: str) -> int:
    """Signatures of public functions and methods (what another package may call) that name `Any` in a
    parameter or the return: issue 24's "no Any across a package boundary"."""
    return len(public_any_names(src))


def public_any_names(src: str) -> list[str]:
    """The qualified names (Class.method) of `public_any`'s signatures."""
    tree = ast.parse(src)
    names: list[str] = []

    def visit(body: list[ast.stmt], public: bool, prefix: str = "") -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, public and not node.name.startswith("_"), f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = node.name
                if not public or (name.startswith("_") and not name.startswith("__")):
                    continue
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                if _mentions_any(node.returns) or any(
                    p is not None and _mentions_any(p.annotation) for p in params
                ):
                    names.append(prefix + name)

    visit(tree.body, True)
    return names


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
    any_n = ga_n = 0
    pub_any: list[str] = []
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
            rel = p.relative_to(PKG).as_posix()
            pub_any += [f"{rel}:{q}" for q in public_any_names(src)]
        ga_n += count_calls(src, {"getattr", "hasattr"})
    rows.sort(reverse=True)
    print("| measure | value |\n|---|---|")
    for n, name in rows[:5]:
        print(f"| lines: {name} | {n} |")
    print(f"| modules over 600 lines | {sum(1 for n, _ in rows if n > 600)} |")
    print(f"| `Any` (names in the AST) | {any_n} |")
    allowed = [k for k in pub_any if k in ALLOWED]
    open_ = [k for k in pub_any if k in OPEN]
    print(f"| public signatures naming `Any` (outside remote/) | {len(pub_any)} |")
    print(f"| of them: a third-party API's `Any` (allowed) | {len(allowed)} |")
    print(f"| of them: open, with a reason (`--any`) | {len(open_)} |")
    print(f"| of them: unexplained | {len(pub_any) - len(allowed) - len(open_)} |")
    if fleet_max[0]:
        print(f"| largest module of fleet/ | {fleet_max[1]} {fleet_max[0]} |")
    print(f"| getattr/hasattr calls | {ga_n} |")
    if "--any" in sys.argv:
        print()
        for k in pub_any:
            why = ALLOWED.get(k) or OPEN.get(k) or "unexplained"
            print(f"- {k}: {'allowed: ' if k in ALLOWED else 'open: ' if k in OPEN else ''}{why}")
    if "--mypy" in sys.argv:
        print(f"| mypy without the debt list | {mypy_errors()} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

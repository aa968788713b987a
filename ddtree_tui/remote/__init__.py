"""Programs that run on a GPU host with the host's Python and its standard library only.

Every module here is ordinary Python (linted, type-checked and unit-tested in this repository) and is sent
to the host as its own source: `python -I -c "$(source(NAME))"`. Nothing here may import anything but the
standard library and other modules of this package (an import-linter contract and a unit test check it).

One call protocol: the program reads one JSON object on stdin and writes one JSON reply line on stdout
(the last line that parses as JSON is the reply; typed reply models live on our side, next to the caller).
Two programs stream instead (the sampler and the service watcher: one JSON line per interval), and the
doctor's probe prefixes its line with a marker because the libraries it imports may print to stdout.

`source(name)` bundles a program: when the module imports helpers from this package
(`from ddtree_tui.remote.hostlib import ...`), their sources travel with it and a small import hook on the
host serves them; a module without such imports is sent exactly as it is in the file.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from importlib import resources

PACKAGE = "ddtree_tui.remote"


def module_text(name: str) -> str:
    """The file text of `ddtree_tui/remote/<name>.py`."""
    return resources.files(PACKAGE).joinpath(f"{name}.py").read_text(encoding="utf-8")


def _remote_imports(text: str) -> list[str]:
    """The names of this package's modules that `text` imports (top level or not)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(text)):
        mods: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PACKAGE + "."):
                mods.append(node.module[len(PACKAGE) + 1 :])
            elif node.module == PACKAGE:
                mods.extend(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            mods.extend(a.name[len(PACKAGE) + 1 :] for a in node.names if a.name.startswith(PACKAGE + "."))
        found.extend(m for m in mods if m not in found)
    return found


@functools.cache
def _helper_imports(name: str) -> tuple[str, ...]:
    """`_remote_imports` of the helper module `name`, parsed once per process: the programs share their
    helpers (hostlib, trust, atomicio), and every process that opens a fleet bundles several programs (issue 24:
    parsing each helper again for each program was most of their ~0.1 s)."""
    return tuple(_remote_imports(module_text(name)))


def dependencies(text: str) -> list[str]:
    """Every helper module of this package that a program's text needs, dependencies first."""
    order: list[str] = []

    def visit(deps: Sequence[str]) -> None:
        for dep in deps:
            if dep not in order:
                visit(_helper_imports(dep))
                order.append(dep)

    visit(_remote_imports(text))
    return order


def bundle(text: str) -> str:
    """A program's text with the helper modules it imports from this package, ready for `python -I -c`."""
    deps = dependencies(text)
    if not deps:
        return text
    future = "from __future__ import annotations"
    lines = text.splitlines()
    has_future = any(x.startswith(future) for x in lines)
    body = "\n".join(x for x in lines if not x.startswith(future)) + "\n"
    sources = {"ddtree_tui": "", PACKAGE: ""}
    sources.update({f"{PACKAGE}.{d}": module_text(d) for d in deps})
    head = (future + "\n") if has_future else ""
    loader = "\n".join(x for x in module_text("loader").splitlines() if not x.startswith(future))
    return head + loader + f"\ninstall({sources!r})\n" + body


@functools.cache
def source(name: str) -> str:
    """The program `ddtree_tui/remote/<name>.py` as sent to the host (`python -I -c SOURCE`)."""
    return bundle(module_text(name))

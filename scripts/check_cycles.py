#!/usr/bin/env python3
"""Prints every import cycle among ddtree_tui's modules (imports inside functions included) and exits 1 if any.

Uses grimp (import-linter's graph builder), `if TYPE_CHECKING:` imports included: an annotation-only import
back up the layers is still a design cycle (issue 24), even though it never runs. A cycle is a strongly
connected component of more than one module of the import graph. Importing `a.b.c` counts as importing the packages `a.b` (its `__init__` runs first) too,
as Python does; a child's edge back to its own package is not counted.
"""

from __future__ import annotations

import sys

import grimp


def cycles(package: str = "ddtree_tui") -> list[list[str]]:
    graph = grimp.build_graph(package, include_external_packages=False, exclude_type_checking_imports=False)
    mods = sorted(graph.modules)
    edges: dict[str, set[str]] = {}
    for m in mods:
        out = set()
        for dep in graph.find_modules_directly_imported_by(m):
            # importing a.b.c runs a/__init__ and a/b/__init__ first: those packages are edges too (a package
            # that re-exports its children pulls them all in), except the importer's own packages
            parts = dep.split(".")
            for i in range(2, len(parts) + 1):
                target = ".".join(parts[:i])
                if target == m or m.startswith(target + "."):
                    continue  # a module importing its own package (its __init__) is not a design cycle
                out.add(target)
        edges[m] = out
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for m in mods:
        if m not in index:
            visit(m)
    return found


def main() -> int:
    found = cycles()
    for comp in found:
        print("cycle:", " <-> ".join(comp))
    print(f"{len(found)} import cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

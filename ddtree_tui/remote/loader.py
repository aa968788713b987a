"""The head of every bundled program: drop the current directory from sys.path, serve the helpers from memory.

`ddtree_tui.remote.bundle` sends this module's source, then `install({module name: source})`, then the
program. Python >= 3.6, standard library only.
"""

import sys

if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]  # never import from the current directory (the workdir), whatever the Python version


def install(sources):  # type: (dict[str, str]) -> None
    """Serve `sources` (module name → source) to `import` ahead of anything installed on the host."""
    import importlib.util

    class Finder:
        def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
            if name not in sources:
                return None
            return importlib.util.spec_from_loader(name, self, is_package=name.count(".") < 2)  # type: ignore[arg-type]

        def create_module(self, spec):  # type: ignore[no-untyped-def]
            return None

        def exec_module(self, module):  # type: ignore[no-untyped-def]
            code = compile(sources[module.__name__], "<ddtree-tui %s>" % module.__name__, "exec")
            exec(code, module.__dict__)

    sys.meta_path.insert(0, Finder())

"""A package's names imported from their modules the first time they are asked for (PEP 562).

Importing a small module of a package must not import every engine the package's `__init__` names (each
process start paid for them: issue 24); `bench/`, `fleet/` and `telemetry/` export this way."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping


def lazy_getattr(
    namespace: MutableMapping[str, object], where: Mapping[str, str], owner: str
) -> Callable[[str], object]:
    """The package's module `__getattr__`: `name` from the module `where` names, kept in `namespace` (the
    package's globals) so the next lookup is a plain one."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        value: object = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__

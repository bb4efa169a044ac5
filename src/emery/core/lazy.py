"""Package namespaces that import their modules on first use.

A package ``__init__`` re-exporting its public names would import every module (and
openai, OpenTelemetry, matplotlib...) whenever any one of them is needed; a CLI command
such as ``emery jobs pause`` should not pay for that. ``lazy_exports`` gives a package a
module ``__getattr__`` that imports a name's module only when the name is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``; ``exports`` maps name → module."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook has this name
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:  # noqa: N807 - the module hook has this name
        return sorted(exports)

    return __getattr__, __dir__

"""The layer order of emery's packages (DESIGN §2): a package imports only packages of a
lower rank, or of its own rank without forming a loop. ``tests/unit/test_layers.py``
checks every import against it."""

from __future__ import annotations

LAYERS: dict[str, int] = {
    "core": 0,
    "store": 1,
    "lm": 1,
    "tracing": 2,
    "verifiers": 3,
    "data": 3,
    "systems": 3,
    "proxy": 3,
    "evaluation": 4,
    "config": 5,
    "algorithms": 5,
    "training": 5,
    "reports": 6,
    "integrations": 6,
    "workers": 6,
    "jobs": 7,
    "cli": 8,
    "server": 8,
    "taskapp": 8,
    "demos": 8,
    "sdk": 8,
    "__init__": 9,
    "__main__": 9,
    "plugin": 9,
}
"""Package (``__init__``, ``__main__`` and ``plugin``: the modules of the ``emery`` package
itself) → rank."""

LONG_MODULE_LINES = 500
"""A module longer than this says in its docstring why it is long ("why this is long: …"):
length alone is no reason to split a concept, but a long module is often two."""

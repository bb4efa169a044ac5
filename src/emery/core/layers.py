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
    "jobs": 6,
    "cli": 7,
    "server": 7,
    "taskapp": 7,
    "demos": 7,
    "__init__": 8,
    "__main__": 8,
}
"""Package (``__init__`` and ``__main__``: the modules of the ``emery`` package itself) → rank."""

LONG_MODULE_LINES = 500
"""A module longer than this says in its docstring why it is long ("why this is long: …"):
length alone is no reason to split a concept, but a long module is often two."""

"""A config becomes a system, a verifier, a dataset or an LM in one place: only
``config/resolve.py`` calls the builders (``resolve_job`` and the functions behind it, and
``resolve_lm`` and ``build_models`` for models), so every process that runs, scores,
samples, serves or publishes a job applies the same checks and wraps its models alike
(response cache, token recording, usage meter)."""

from __future__ import annotations

import ast
from pathlib import Path

import emery

SRC = Path(emery.__file__).parent
BUILDERS = {
    "resolve_system",
    "resolve_verifier",
    "resolve_dataset",
    "build_system",
    "build_verifier",
    "build_lm",
    "build_base_lm",
    "local_lm",
    "LocalLM",
}
HOMES = {
    "config/resolve.py",  # the one resolver
    "systems/registry.py",  # build_system's own module
    "verifiers/config.py",  # build_verifier's own module (a verifier of verifiers)
    "lm/config.py",  # the LM builders' own module (a local model made there too)
}


def callers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in BUILDERS:
                found.setdefault(str(path.relative_to(SRC)), set()).add(name)
    return found


def test_only_the_resolver_builds_a_system_verifier_dataset_or_lm_from_a_config() -> None:
    outside = {module: names for module, names in callers().items() if module not in HOMES}
    assert outside == {}, (
        f"build through config/resolve.py (resolve_job, resolve_lm, build_models): {outside}"
    )


def test_the_check_sees_a_call() -> None:
    assert {"build_system", "build_verifier", "build_lm", "build_base_lm"} <= callers()[
        "config/resolve.py"
    ]

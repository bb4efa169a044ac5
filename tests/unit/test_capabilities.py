"""Algorithms ask systems for capabilities (``emery.systems.capabilities``) and import no
concrete system; each concrete system offers the capabilities its kind has."""

from __future__ import annotations

import ast
from pathlib import Path

import emery
from emery.core.models import Candidate
from emery.systems.capabilities import (
    MutatesStructure,
    ProposesCode,
    StagedPrompts,
)
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import GraphSystem
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig
from emery.systems.prompt_program import PromptProgram, PromptProgramConfig

SRC = Path(emery.__file__).parent

SYSTEM_VOCABULARY = {
    "emery.systems.base": "the System protocol and what a run returns",
    "emery.systems.capabilities": "the capability protocols algorithms ask for",
    "emery.systems.stages": "stage config models, the values StagedPrompts hands out",
    "emery.systems.parsers": "a stage's parser config",
    "emery.systems.templates": "placeholders in message templates",
    "emery.systems.formats": "the reply format a stage's parser implies",
    "emery.systems.prompt_layout": "layout choices of a stage, as component values",
    "emery.systems.demo_retrieval": "how many nearest demos a stage shows",
}
"""The ``emery.systems`` modules an algorithm may import: protocols, and the value types and
pure text helpers of the components those protocols hand out. None of them defines or
builds a system (and none imports a module that does: ``test_the_vocabulary_is_closed``).
Every other ``emery.systems`` module (``prompt_program``, ``graph.*``, ``harness.*``,
``function_agent``, ``task_app``, ``registry``, the package itself, ...) is a concrete
system or reaches one; an algorithm that needs something of it asks for a capability."""


def systems_imports(path: Path) -> list[tuple[str, int]]:
    """(``emery.systems…`` module, line) for every import in ``path``, typing-only included
    (a concrete system named only in a type hint still ties the algorithm to it)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        found += [
            (module, node.lineno)
            for module in modules
            if module == "emery.systems" or module.startswith("emery.systems.")
        ]
    return found


def outside_vocabulary(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(SRC.parent) if path.is_relative_to(SRC) else path}:{line}:"
        f" imports {module}"
        for path in paths
        for module, line in systems_imports(path)
        if module not in SYSTEM_VOCABULARY
    ]


def test_no_algorithm_imports_a_concrete_system() -> None:
    found = outside_vocabulary(sorted((SRC / "algorithms").rglob("*.py")))
    assert not found, (
        "algorithms import concrete systems (ask for a capability in"
        " emery.systems.capabilities instead):\n" + "\n".join(found)
    )


def test_the_vocabulary_is_closed() -> None:
    paths = [SRC.parent / (module.replace(".", "/") + ".py") for module in SYSTEM_VOCABULARY]
    assert all(path.is_file() for path in paths)
    found = outside_vocabulary(paths)
    assert not found, "an allowed module imports a concrete system:\n" + "\n".join(found)


def test_the_check_sees_typing_only_and_package_imports(tmp_path: Path) -> None:
    module = tmp_path / "algorithm.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "import emery.systems.harness.code\n"
        "from emery.systems import graph\n"
        "from emery.systems.capabilities import ProposesCode\n"
        "if TYPE_CHECKING:\n"
        "    from emery.systems.prompt_program import PromptProgram\n"
    )
    assert [module for module, _ in systems_imports(module)] == [
        "emery.systems.harness.code",
        "emery.systems",
        "emery.systems.capabilities",
        "emery.systems.prompt_program",
    ]
    assert len(outside_vocabulary([module])) == 3


def program() -> PromptProgram:
    return PromptProgram(
        PromptProgramConfig.model_validate(
            {"stages": [{"name": "answer", "messages": [{"template": "{question}"}]}]}
        )
    )


def graph() -> GraphSystem:
    return GraphSystem(
        GraphConfig.model_validate(
            {
                "nodes": [
                    {
                        "kind": "llm",
                        "name": "solve",
                        "messages": [{"role": "user", "template": "{question}"}],
                    },
                    {"kind": "output", "name": "output", "value": "solve"},
                ]
            }
        )
    )


def test_each_system_offers_the_capabilities_of_its_kind() -> None:
    harness = CodeHarness(CodeHarnessConfig(environment="calculator"))
    offered = {
        name: {
            capability.__name__
            for capability in (StagedPrompts, ProposesCode, MutatesStructure)
            if isinstance(system, capability)
        }
        for name, system in {"program": program(), "graph": graph(), "harness": harness}.items()
    }
    assert offered == {
        "program": {"StagedPrompts"},
        "graph": {"StagedPrompts", "MutatesStructure"},
        "harness": {"ProposesCode"},
    }


def test_the_harness_says_which_components_are_code_and_checks_a_module() -> None:
    harness = CodeHarness(CodeHarnessConfig(environment="calculator"))
    assert harness.is_code_component("code:runtime")
    assert not harness.is_code_component("prompt:system")
    assert harness.code_problem("def run(kit):\n    return ''\n") is None
    assert harness.code_problem("x = 1\n") is not None
    assert "run(kit)" in harness.code_brief


def test_a_graph_offers_its_structure_and_counts_its_calls() -> None:
    system = graph()
    seed = system.with_structure(system.seed_candidate())
    assert system.structure_component in seed.components
    assert system.structure_nodes(seed) == ["solve"]
    assert system.lm_calls(seed) == 1
    edits = dict(system.structure_edits(seed, {"question"}, samples=3))
    assert "vote@solve#0" in edits
    voted = edits["vote@solve#0"]
    spec = system.read_structure(voted.spec)
    child = Candidate(components={**seed.components, system.structure_component: spec})
    assert system.lm_calls(child) == 3

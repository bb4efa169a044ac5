"""A code harness's environment is a plug-in (``systems/harness/environment.py:
ENVIRONMENTS``): ``[system] environment`` names a class or function that makes one, a
built-in (``calculator``, ``kv_store``, ``files``), ``module:attr`` or an
``emery.environments`` entry point; an unknown one is one line listing the known ones."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from importlib.metadata import EntryPoint
from typing import Any, ClassVar

import pytest
from harness_support import calculator_lm

from emery.core import plugins
from emery.core.errors import ConfigError
from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.systems.harness.environment import ENVIRONMENTS, load_environment
from emery.systems.harness.envs.calculator import CalculatorEnv
from emery.systems.harness.envs.files import FilesEnv
from emery.systems.registry import build_system, parse_system_config
from emery.verifiers import ExactMatch

SAY = "def run(kit):\n    return kit.execute('say', {}).text\n"
"""A loop that acts once and answers with what the environment said."""


class ParrotEnv:
    """One tool, ``say``, which repeats the task's ``word``."""

    tools: ClassVar[list[dict[str, Any]]] = [
        {"name": "say", "description": "The word of the task.", "parameters": {}}
    ]

    def reset(self, task: Mapping[str, Any]) -> str:
        self.word = str(task["word"])
        return "Find the word."

    def execute(self, action: Mapping[str, Any]) -> str:
        return self.word


def run_episodes(environment: str) -> list[float]:
    config = parse_system_config({"kind": "code_harness", "environment": environment, "code": SAY})
    system = build_system(config)
    examples = [Example(id=w, input={"word": w}, expected=w) for w in ("kiwi", "fig")]
    evaluator = Evaluator(system, ExactMatch(), calculator_lm())
    result = asyncio.run(evaluator.evaluate(system.seed_candidate(), examples, "val"))
    return list(result.scores)


def test_the_built_in_environments_still_resolve() -> None:
    assert ENVIRONMENTS.get("calculator") is CalculatorEnv
    assert load_environment("files") is FilesEnv
    assert ENVIRONMENTS.names() == ["calculator", "files", "kv_store"]


def test_a_module_attr_environment_runs_episodes() -> None:
    assert load_environment(f"{__name__}:ParrotEnv") is ParrotEnv
    assert run_episodes(f"{__name__}:ParrotEnv") == [1.0, 1.0]


def test_an_entry_point_environment_runs_episodes(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = EntryPoint(name="parrot", value=f"{__name__}:ParrotEnv", group="emery.environments")
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [entry] if group == entry.group else []
    )
    assert "parrot" in ENVIRONMENTS.names()
    assert run_episodes("parrot") == [1.0, 1.0]


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        (
            "nope",
            "system.environment: unknown environment 'nope'; known environments: calculator,"
            " files, kv_store (or name one as 'module:attr')",
        ),
        (f"{__name__}:SAY", f"system.environment: '{__name__}:SAY' is a str; expected Callable"),
        ("no_such_module_x:Env", "system.environment: cannot import module 'no_such_module_x'"),
    ],
)
def test_a_bad_environment_is_one_line(environment: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_environment(environment)
    assert str(info.value).startswith(expected)
    assert "\n" not in str(info.value)


def test_the_plug_in_surface_exports_the_environment_contract() -> None:
    from emery import plugin
    from emery.systems.harness.environment import Environment
    from emery.systems.harness.observation import Observation

    assert (plugin.Environment, plugin.Observation) == (Environment, Observation)
    assert isinstance(ParrotEnv(), plugin.Environment)

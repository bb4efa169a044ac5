"""Built-in harness environments and task sets, user environments, the environment's own
success signal, and ``emery train`` running a code-harness job from a config file."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any, ClassVar

import pytest
from harness_support import calculator_lm

from emery.cli.app import main
from emery.config.resolve import resolve_system
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.data.tasks import builtin_task
from emery.evaluation import Evaluator
from emery.systems.harness.envs.calculator import CalculatorEnv
from emery.systems.harness.envs.files import FilesEnv
from emery.systems.harness.envs.kv_store import KeyValueEnv
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig
from emery.verifiers import ExactMatch


def test_calculator_answers_follow_from_the_tools() -> None:
    env = CalculatorEnv()
    inputs, expected = CalculatorEnv.generate(random.Random(3))
    question = env.reset(inputs)
    words = question.split()
    a, big, b, small = words[2], words[3], words[5], words[6].rstrip(",")
    converted = env.execute(
        {"tool": "convert", "arguments": {"value": a, "from_unit": big, "to_unit": small}}
    )
    total = env.execute({"tool": "calculate", "arguments": {"expression": f"{converted} + {b}"}})
    assert total.text == expected
    bad = env.execute({"tool": "calculate", "arguments": {"expression": "__import__('os')"}})
    assert not bad.ok
    assert "unsupported" in bad.text


def test_kv_store_answer_needs_three_lookups() -> None:
    env = KeyValueEnv()
    inputs, expected = KeyValueEnv.generate(random.Random(5))
    env.reset(inputs)
    subject = inputs["question"].split("lead of ")[1].split("'s")[0]

    def get(key: str) -> str:
        return env.execute({"tool": "get", "arguments": {"key": key}}).text

    lead = get(f"team:{get(f'person:{subject}:team')}:lead")
    assert get(f"person:{lead}:city") == expected
    assert not env.execute({"tool": "get", "arguments": {"key": "nope"}}).ok


def test_files_live_in_a_fresh_directory_and_stay_inside_it() -> None:
    env = FilesEnv()
    inputs, expected = FilesEnv.generate(random.Random(1))
    env.reset(inputs)
    root = env.root
    assert root is not None
    assert root.is_dir()
    animal = inputs["question"].split("many ")[1].split("s were")[0]
    found = env.execute({"tool": "search", "arguments": {"text": animal}}).text.splitlines()
    assert len(found) == 1
    text = env.execute({"tool": "read_file", "arguments": {"path": found[0]}}).text
    assert f"Counted {expected} {animal}s" in text
    escape = env.execute({"tool": "read_file", "arguments": {"path": "../../etc/passwd"}})
    assert not escape.ok
    assert "outside" in escape.text
    env.close()
    assert not root.exists()


@pytest.mark.parametrize("name", ["harness_calculator", "harness_kv", "harness_files"])
def test_builtin_task_sets_come_with_their_harness(name: str) -> None:
    dataset = builtin_task(name).dataset(seed=0, n_train=4, n_val=4, n_test=4)
    assert len(dataset.test) == 4
    assert all(example.expected not in (None, "") for example in dataset)
    config = JobConfig.model_validate({"dataset": {"task": name}})
    assert isinstance(resolve_system(config), CodeHarness)


class SelfCheckingEnv:
    """A user environment with its own success signal (no gold output needed)."""

    tools: ClassVar[list[dict[str, Any]]] = [
        {"name": "noop", "description": "Does nothing.", "parameters": {}}
    ]

    def reset(self, task: dict[str, Any]) -> str:
        self.target = str(task["target"])
        return f"Say {self.target}."

    def execute(self, action: dict[str, Any]) -> str:
        return "nothing happened"

    def check(self, answer: str) -> tuple[float, str]:
        ok = answer == self.target
        return (1.0 if ok else 0.0), ("right" if ok else f"expected {self.target}")


def test_user_environment_by_module_attr_with_its_own_check() -> None:
    from emery.core.models import Example

    code = "def run(kit):\n    kit.execute('noop')\n    return kit.instruction.split()[1][:-1]\n"
    system = CodeHarness(
        CodeHarnessConfig(environment="test_harness_envs:SelfCheckingEnv", code=code)
    )
    assert system.reports_rewards
    evaluator = Evaluator(system, ExactMatch(), calculator_lm())
    examples = [Example(id="a", input={"target": "yes"}), Example(id="b", input={"target": "x"})]
    result = asyncio.run(evaluator.evaluate(system.seed_candidate(), examples, "val"))
    assert result.scores == [1.0, 1.0]
    assert result.results[0].feedback == "right"
    with pytest.raises(
        ConfigError, match=r"made a NotAnEnv, not an environment \(it has no execute\)"
    ):
        CodeHarness(CodeHarnessConfig(environment="test_harness_envs:NotAnEnv"))


class NotAnEnv:
    tools: ClassVar[list[dict[str, Any]]] = []

    def reset(self, task: dict[str, Any]) -> str:
        return ""


def test_emery_train_runs_a_code_harness_job(tmp_path: Path) -> None:
    config = tmp_path / "harness.toml"
    config.write_text(
        """
[job]
name = "calc-harness"
algorithm = "baseline"
[dataset]
task = "harness_calculator"
n_train = 2
n_val = 3
n_test = 3
[system]
kind = "code_harness"
environment = "calculator"
max_llm_calls = 6
[lm.task]
model = "python/harness_support:calculator_lm"
""",
        encoding="utf-8",
    )
    store = tmp_path / "emery.db"
    with pytest.raises(SystemExit) as info:
        main(["train", str(config), "--store", str(store), "--stream-format", "none", "--json"])
    assert info.value.code in (0, None)
    results = list((tmp_path / "results").glob("calc-harness-*.json"))
    assert results
    data = json.loads(results[0].read_text())
    assert data["best_test"]["mean"] == 1.0

"""Scripted models and environments for the code-harness tests (imported as
``harness_support``; configs name ``harness_support:FlakyLookupEnv``)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from emery.core.models import ChatMessage, Example
from emery.lm import FakeLM
from emery.systems.harness.code import SEED_CODE
from emery.systems.harness.envs.calculator import CalculatorEnv
from emery.systems.harness.observation import Observation

# The baseline loop retrying an action once after an error observation: solves FlakyLookupEnv.
RETRYING = SEED_CODE.replace(
    '            text = str(kit.execute(call["tool"], call["arguments"]))\n',
    '            observation = kit.execute(call["tool"], call["arguments"])\n'
    "            if not observation.ok:  # transient errors: try once more\n"
    '                observation = kit.execute(call["tool"], call["arguments"])\n'
    "            text = str(observation)\n",
)
CRASHING = "def run(kit):\n    return kit.no_such_helper()\n"
"""A module that compiles but crashes on its first episode."""


def _observations(messages: Sequence[ChatMessage]) -> list[str]:
    return [
        m["content"].removeprefix("Observation: ")
        for m in messages
        if m["role"] == "user" and m["content"].startswith("Observation: ")
    ]


def call(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def calculator_reply(messages: Sequence[ChatMessage]) -> str:
    """Solves calculator questions: convert, then add, then submit."""
    question = next(m["content"] for m in messages if m["role"] == "user")
    match = re.match(r"What is (\d+) (\w+) plus (\d+) (\w+), expressed in (\w+)\?", question)
    assert match is not None, question
    a, big, b, small, _ = match.groups()
    seen = _observations(messages)
    if not seen:
        return "I will convert first. " + call("convert", value=a, from_unit=big, to_unit=small)
    if len(seen) == 1:
        return call("calculate", expression=f"{seen[0]} + {b}")
    return call("submit", answer=seen[1])


def calculator_lm() -> FakeLM:
    return FakeLM(calculator_reply, model="fake/calculator")


def calculator_examples(n: int, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    examples = []
    for index in range(n):
        inputs, expected = CalculatorEnv.generate(rng)
        examples.append(Example(id=f"calc-{index}", input=inputs, expected=expected))
    return examples


class FlakyLookupEnv:
    """``lookup(key)`` fails the first time for each key ("busy, try again"), then works."""

    tools: ClassVar[list[dict[str, Any]]] = [
        {"name": "lookup", "description": "The value of a key.", "parameters": {"key": "k"}}
    ]

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.tried: set[str] = set()

    def reset(self, task: Mapping[str, Any]) -> str:
        self.values = {str(task["key"]): str(task["value"])}
        return f"What is the value of {task['key']}?"

    def execute(self, action: Mapping[str, Any]) -> Observation:
        key = str((action.get("arguments") or {}).get("key"))
        if key not in self.tried:
            self.tried.add(key)
            return Observation("the store is busy, try again", ok=False)
        return Observation(self.values.get(key, "missing"))


def lookup_reply(messages: Sequence[ChatMessage]) -> str:
    """Looks the key up once; answers with the observation (an error gives 'unknown')."""
    question = next(m["content"] for m in messages if m["role"] == "user")
    key = question.removeprefix("What is the value of ").rstrip("?")
    seen = _observations(messages)
    if not seen:
        return call("lookup", key=key)
    last = seen[-1]
    return call("submit", answer="unknown" if last.startswith("ERROR") else last)


def lookup_examples(n: int, prefix: str) -> list[Example]:
    return [
        Example(
            id=f"{prefix}-{i}",
            input={"key": f"{prefix}{i}", "value": f"v{i * 7}"},
            expected=f"v{i * 7}",
        )
        for i in range(n)
    ]


def flaky_store() -> tuple[Any, Any]:
    """The code harness on ``FlakyLookupEnv`` and its dataset: only a loop that retries
    after an error observation solves it."""
    from emery.core.models import Dataset
    from emery.systems.harness.system import CodeHarness, CodeHarnessConfig

    system = CodeHarness(
        CodeHarnessConfig(environment="harness_support:FlakyLookupEnv", timeout_s=20)
    )
    dataset = Dataset(
        name="flaky",
        description="Look a key up in a flaky store.",
        train=lookup_examples(6, "tr"),
        val=lookup_examples(4, "va"),
        test=lookup_examples(6, "te"),
    )
    return system, dataset

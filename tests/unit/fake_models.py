"""LMs that configs load as ``python/fake_models:<attr>`` in the unit tests.

``tests/unit`` has no ``__init__.py``, so pytest puts it on ``sys.path`` and this module
imports as ``fake_models``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from emery.core.models import ChatMessage
from emery.data.tasks import builtin_task
from emery.lm import Completion, FakeLM, TokenUsage

ECHO_LM = FakeLM(lambda messages: messages[-1]["content"], model="fake/echo")
NOT_AN_LM = object()


def make_echo_lm() -> FakeLM:
    """A factory: ``python/fake_models:make_echo_lm`` calls it."""
    return FakeLM(lambda messages: messages[-1]["content"], model="fake/echo-factory")


@cache
def word_problem_answers() -> dict[str, int]:
    """Question → gold answer for the first 200 generated word problems (seed 0)."""
    dataset = builtin_task("word_problems").dataset(seed=0, n_train=0, n_val=0, n_test=200)
    return {example.input["question"]: int(example.expected) for example in dataset.test}


def fake_answer(question: str) -> int:
    """Right when the gold answer is even, off by one when it is odd."""
    gold = word_problem_answers()[question]
    return gold if gold % 2 == 0 else gold + 1


def _solve(messages: Sequence[ChatMessage]) -> str:
    question = messages[-1]["content"]
    return f"Let me think.\nAnswer: {fake_answer(question)}"


def word_problem_lm() -> FakeLM:
    """Answers the seed-0 word problems, correctly exactly when the gold answer is even."""
    return FakeLM(_solve, model="fake/word-problems")


class RecordingLM:
    """Replies ``reply`` and records the sampling parameters of every call."""

    def __init__(self, reply: str = "ok", model: str = "fake/recording") -> None:
        self.model = model
        self.reply = reply
        self.params: list[dict[str, Any]] = []

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        self.params.append(
            {"temperature": temperature, "max_tokens": max_tokens, "stop": stop, **params}
        )
        return Completion(
            text=self.reply,
            usage=TokenUsage(prompt_tokens=3, completion_tokens=1),
            model=self.model,
        )


def format_last_lm(gold: dict[str, Any], reminder: str) -> FakeLM:
    """A task model as weak as Qwen2.5-0.5B on real problems: it writes the answer line only
    when ``reminder`` (a stage's output-format sentence) is the last line of the last user
    message; otherwise it ends in LaTeX, which the stage's parser cannot read. ``gold`` maps
    each question to its answer; the question is found inside the user message."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        question = next((q for q in gold if q in content), None)
        if question is None:  # the answer stage's call: it cannot restate either
            return "Working.\n\\(\\boxed{}\\)"
        if reminder and content.rstrip().endswith(reminder):
            return f"Working.\nAnswer: {gold[question]}"
        return f"Working.\n\\(\\boxed{{{gold[question]}}}\\)"

    return FakeLM(reply, model="fake/format-last")


def boxed_reasoner_lm(gold: dict[str, Any], reminder: str) -> FakeLM:
    """Qwen2.5-0.5B on SVAMP: it works each problem out and ends in LaTeX (right, but the
    stage's parser cannot read it); with ``reminder`` as the last line of the user turn it
    skips its reasoning and writes a wrong bare guess; asked to restate a worked reply (the
    answer stage), it copies the boxed answer in the required format."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        if content.startswith("Worked reply:"):
            boxed = re.search(r"\\boxed\{(-?\d+)\}", content)
            return f"Answer: {boxed.group(1)}" if boxed else "Answer: unknown"
        question = next(q for q in gold if q in content)
        if reminder and content.rstrip().endswith(reminder):
            return f"Answer: {int(gold[question]) + 1}"
        return f"Working it out.\n\\(\\boxed{{{gold[question]}}}\\)"

    return FakeLM(reply, model="fake/boxed-reasoner")

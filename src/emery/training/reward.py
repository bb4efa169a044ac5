"""The RL reward: the job's verifier on the parsed completion of the job's own prompt.

An RL job trains the prompt of a single-stage prompt program: each example's prompt is
that stage's chat (instruction, demos and templates, as the system would send it); a
completion is read as the stage reads a reply and scored by the verifier against the
example (an unreadable completion scores 0). When the prompt's layout restates unreadable
replies (``answer = "restate"``, a choice prompt searches may make), the restatement, a
copy of the reply's final answer in the stage's format, is asked of ``lm`` (the job's task
model, not the model being trained). No torch here: this runs in tests without training.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from emery.core.errors import ConfigError
from emery.core.models import Candidate, ChatMessage, Example
from emery.lm.base import LM
from emery.systems.base import RunContext
from emery.systems.parsers import ParseError
from emery.systems.prompt_layout import StageLayout
from emery.systems.prompt_program import PromptProgram, StageConfig
from emery.verifiers.base import Verifier


class VerifierReward:
    """Prompts for examples, and trl's reward function: ``(completions, example_id) →
    scores``."""

    __name__ = "verifier"  # trl logs a reward function by its name

    def __init__(
        self,
        system: Any,
        candidate: Candidate,
        verifier: Verifier,
        examples: Sequence[Example],
        lm: LM | None = None,
    ) -> None:
        if not isinstance(system, PromptProgram) or len(system.config.stages) != 1:
            raise ConfigError(
                "an rl job trains the prompt of a single-stage prompt program"
                f" (system kind prompt_program, one stage); got {_described(system)}"
            )
        self.system = system
        self.stage: StageConfig = system.config.stages[0]
        self.candidate = candidate
        self.verifier = verifier
        self.examples = {example.id: example for example in examples}
        self.layout = StageLayout.of(candidate.components, self.stage.name)
        self.lm = lm
        """What restates unreadable completions (needed only when ``restates``)."""

    @property
    def restates(self) -> bool:
        """Whether an unreadable completion is restated (then scoring calls the LM)."""
        return self.layout.answer == "restate"

    def prompt(self, example: Example) -> list[ChatMessage]:
        """The chat the system's stage sends for ``example``."""
        stage = self.stage
        return self.system.messages(
            stage,
            self.candidate.components.get(stage.name, stage.instruction),
            self.candidate.demos.get(stage.name, ()),
            example.input,
            self.layout,
        )

    def rows(self) -> list[dict[str, Any]]:
        """trl's conversational prompt rows, one per example, carrying its id."""
        return [
            {"prompt": self.prompt(example), "example_id": example.id}
            for example in self.examples.values()
        ]

    async def score(self, example: Example, text: str) -> float:
        """The verifier's score of ``text`` read as the stage reads a reply (0: unreadable)."""
        try:
            output = await self._read(example, text)
        except ParseError:
            return 0.0
        verdict = await self.verifier.verify(example, output)
        return float(verdict.score)

    async def _read(self, example: Example, text: str) -> Any:
        if not self.restates:
            return self.stage.parser.parse(text)
        if self.lm is None:
            raise ConfigError("the prompt restates unreadable replies: its reward needs an LM")
        ctx = RunContext(lm=self.lm, example=example, split="train")
        return await self.system.answer_of(ctx, self.stage, self.layout, text)

    def __call__(
        self, completions: Sequence[Any], example_id: Sequence[str], **_: Any
    ) -> list[float]:
        """One reward per completion (trl passes the example ids of the prompt rows)."""
        pairs = [
            (self.examples[key], completion_text(completion))
            for completion, key in zip(completions, example_id, strict=True)
        ]

        async def all_scores() -> list[float]:
            return list(await asyncio.gather(*(self.score(e, text) for e, text in pairs)))

        return asyncio.run(all_scores())


def completion_text(completion: Any) -> str:
    """A completion's text: a plain string, or the content of a conversational reply."""
    if isinstance(completion, str):
        return completion
    return "".join(str(message.get("content") or "") for message in completion)


def _described(system: Any) -> str:
    if isinstance(system, PromptProgram):
        return f"a prompt program of {len(system.config.stages)} stages"
    return type(system).__name__

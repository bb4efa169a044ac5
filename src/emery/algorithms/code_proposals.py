"""Proposals of whole code modules, the one path GEPA and APO take for a system that
offers ``ProposesCode`` (the code harness): the prompts (a critique of the module, a
request for a whole new one, asked again with the reason when a reply is refused), the
reply parsing with the system's own check of a module, and the smoke run a proposal
passes before it is scored. GEPA asks for a module (``CodeProposals.write``); APO asks
for a critique first and writes from it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from emery.algorithms.base import SearchContext
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, ChatMessage, Example
from emery.lm.base import LM
from emery.systems.base import RunContext
from emery.systems.capabilities import ProposesCode
from emery.verifiers.base import as_text

CODE_MAX_TOKENS = 1500
SMOKE_FAILED = "the smoke run failed: "
SHOWN_EPISODES = 4
TRACE_CHARS = 1200
INPUT_CHARS = 300
RETRY_TEMPERATURE = 0.7
PYTHON_FENCE = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)
FENCE = re.compile(r"```[ \t]*\n(.*?)```", re.DOTALL)
CHANGE_LINE = re.compile(r"\A\s*(?:#\s*)?Change:[^\n]*\n")

MATERIAL = """\
{brief}
{task}
Current module:
```python
{code}
```

Episodes run with it (transcripts cut; stop reason and feedback at the end):
{episodes}
"""

CRITIQUE = """
Say what in the module made episodes fail and what to change in it (loop structure,
retries after error observations, nudges, when to submit, how observations are shown to
the model). Be specific and brief; do not write the module."""

REWRITE = """
{critique}Write a better module: fix what made episodes fail (loop structure, retries after
error observations, nudges, when to submit, how observations are shown to the model). Keep
run(kit) at module scope. Start the reply with one line, "Change: <what you change and
why>", then give the whole new module, with that change made, in one ```python fence. A
module identical to the current one is refused."""

REFUSED = """
Your last reply was refused: {problem}. Make the change this time."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n…\n" + text[-limit // 2 :]


def render_episodes(examples: Sequence[Example], results: Sequence[ExampleResult]) -> str:
    """Failed episodes first, then successful ones, each with its transcript excerpt."""
    pairs = sorted(zip(examples, results, strict=False), key=lambda pair: pair[1].score)
    blocks = []
    for number, (example, result) in enumerate(pairs[:SHOWN_EPISODES], 1):
        verdict = "succeeded" if result.score >= 1.0 else "failed"
        blocks.append(
            f"### Episode {number} ({verdict}, score {result.score:g})\n"
            f"Task input: {_clip(as_text(example.input), INPUT_CHARS)}\n"
            f"Transcript:\n{_clip(result.trace or '(nothing recorded)', TRACE_CHARS)}\n"
            f"Answer: {_clip(as_text(result.output), INPUT_CHARS)}\n"
            f"Feedback: {result.feedback or result.error or '-'}"
        )
    return "\n\n".join(blocks)


def refused_messages(messages: list[ChatMessage], problem: str) -> list[ChatMessage]:
    """``messages`` (from ``CodeProposals.rewrite_messages``) asked again after a reply
    refused for ``problem``: the same chat with the reason added."""
    content = messages[0]["content"] + REFUSED.format(problem=problem)
    return [{"role": "user", "content": content}]


@dataclass(frozen=True)
class ModuleReply:
    """A model's reply to ``CodeProposals.rewrite_messages``: the module, or why there is none."""

    reply: str
    text: str | None
    problem: str | None


def parse_code(
    reply: str, current: str, problem_of: Callable[[str], str | None]
) -> tuple[str | None, str | None]:
    """(module, None) or (None, why the reply is unusable). The module is the first of the
    python fences (last first), the other fences (last first) and the whole reply that
    ``problem_of`` (the system's check) passes, less a leading "Change:" line; when none
    does, the reason is the first one's."""
    bodies = [*PYTHON_FENCE.findall(reply)[::-1], *FENCE.findall(reply)[::-1], reply]
    texts = [CHANGE_LINE.sub("", body).strip("\n") + "\n" for body in bodies]
    text = next((text for text in texts if problem_of(text) is None), None)
    if text is None:
        return None, problem_of(texts[0])
    if text.strip() == current.strip():
        return None, "the module is unchanged"
    return text, None


@dataclass(frozen=True)
class CodeProposals:
    """Whole-module proposals for ``system``'s code components on ``task`` (the dataset's
    description, or empty)."""

    system: ProposesCode
    task: str = ""

    def _material(
        self, current: str, examples: Sequence[Example], results: Sequence[ExampleResult]
    ) -> str:
        return MATERIAL.format(
            brief=self.system.code_brief,
            code=current.rstrip(),
            episodes=render_episodes(examples, results),
            task=f"The task: {self.task}\n" if self.task else "",
        )

    def rewrite_messages(
        self,
        current: str,
        examples: Sequence[Example],
        results: Sequence[ExampleResult],
        critique: str = "",
    ) -> list[ChatMessage]:
        """The chat asking for a whole new module (after a reviewer's ``critique``, if any)."""
        review = f"A reviewer's critique of the module:\n{critique.strip()}\n\n" if critique else ""
        content = self._material(current, examples, results) + REWRITE.format(critique=review)
        return [{"role": "user", "content": content}]

    def critique_messages(
        self, current: str, examples: Sequence[Example], results: Sequence[ExampleResult]
    ) -> list[ChatMessage]:
        """The chat asking what in the module made episodes fail (no code)."""
        content = self._material(current, examples, results) + CRITIQUE
        return [{"role": "user", "content": content}]

    async def ask(
        self, lm: LM, messages: list[ChatMessage], current: str, **params: Any
    ) -> ModuleReply:
        """Ask ``lm`` for a new module (``CODE_MAX_TOKENS`` unless given) and check the reply."""
        params.setdefault("max_tokens", CODE_MAX_TOKENS)
        completion = await lm.complete(messages, **params)
        text, problem = parse_code(completion.text, current, self.system.code_problem)
        return ModuleReply(completion.text, text, problem)

    async def write(
        self,
        lm: LM,
        messages: list[ChatMessage],
        current: str,
        *,
        attempts: int,
        on_reply: Callable[[int, ModuleReply], None],
    ) -> ModuleReply:
        """Ask for a module up to ``attempts`` times (retries at ``RETRY_TEMPERATURE``, told
        why the last reply was refused), reporting each reply with its attempt number; the
        first usable reply, or the last refused one."""
        asked = messages
        for attempt in range(1, attempts + 1):
            temperature = None if attempt == 1 else RETRY_TEMPERATURE
            module = await self.ask(lm, asked, current, temperature=temperature)
            on_reply(attempt, module)
            if module.text is not None:
                return module
            asked = refused_messages(messages, str(module.problem))
        return module

    async def smoke_rejection(self, candidate: Candidate, example: Example, lm: LM) -> str | None:
        """The reason to reject ``candidate`` before it is scored: its code crashed, raised,
        exited or hung on ``example`` with ``lm``. None when it ran."""
        problem = await self.system.smoke_test(
            candidate, RunContext(lm=lm, example=example, split="train")
        )
        return None if problem is None else f"{SMOKE_FAILED}{problem}"


def code_proposals(ctx: SearchContext, *, show_task: bool = True) -> CodeProposals | None:
    """Module proposals for the search's system when it offers ``ProposesCode`` (told the
    dataset's description when ``show_task``), else None."""
    system = ctx.system
    if not isinstance(system, ProposesCode):
        return None
    return CodeProposals(system, ctx.dataset.description.strip() if show_task else "")

"""Proposals of whole harness modules (``code:*`` components): the prompts (a critique of
the module, a request for a whole new one), the reply parsing with the compile check, and
the smoke run a proposal passes before it is scored. Shared by GEPA and APO."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emery.algorithms.base import SearchContext
from emery.core.models import Candidate, ChatMessage, Example
from emery.evaluation.results import ExampleResult
from emery.lm.base import LM
from emery.systems.base import RunContext, System
from emery.systems.harness.code import code_problem
from emery.verifiers.base import as_text

CODE_PREFIX = "code:"
CODE_MAX_TOKENS = 1500
SMOKE_FAILED = "the smoke run failed: "
SHOWN_EPISODES = 4
TRACE_CHARS = 1200
INPUT_CHARS = 300
PYTHON_FENCE = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)
FENCE = re.compile(r"```[ \t]*\n(.*?)```", re.DOTALL)
CHANGE_LINE = re.compile(r"\A\s*(?:#\s*)?Change:[^\n]*\n")

KIT = """\
The module defines run(kit) -> str, the episode's final answer. The kit offers:
- kit.complete(system, messages, temperature=None, max_tokens=512) -> str: one model call
- kit.execute(tool, arguments) -> Observation (.text, .ok, .done): one environment action
- kit.parse_tool_call(text) -> {"tool", "arguments"} or None; kit.tools_text();
  kit.skills_index(); kit.read_skill(name); kit.instruction; kit.system_prompt; kit.tools
Model calls and actions are capped per episode (BudgetExceeded ends the episode)."""

MATERIAL = """\
You improve an agent loop written in Python. {kit}
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


def is_code_component(name: str) -> bool:
    """Whether ``name`` holds harness code."""
    return name.startswith(CODE_PREFIX)


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


def _material(
    current: str, examples: Sequence[Example], results: Sequence[ExampleResult], task: str
) -> str:
    return MATERIAL.format(
        kit=KIT,
        code=current.rstrip(),
        episodes=render_episodes(examples, results),
        task=f"The task: {task}\n" if task else "",
    )


def code_messages(
    current: str,
    examples: Sequence[Example],
    results: Sequence[ExampleResult],
    task: str,
    critique: str = "",
) -> list[ChatMessage]:
    """The chat asking for a whole new module (after a reviewer's ``critique``, if any)."""
    review = f"A reviewer's critique of the module:\n{critique.strip()}\n\n" if critique else ""
    content = _material(current, examples, results, task) + REWRITE.format(critique=review)
    return [{"role": "user", "content": content}]


def refused_messages(messages: list[ChatMessage], problem: str) -> list[ChatMessage]:
    """``messages`` (from ``code_messages``) asked again after a reply refused for
    ``problem``: the same chat with the reason added."""
    content = messages[0]["content"] + REFUSED.format(problem=problem)
    return [{"role": "user", "content": content}]


def critique_messages(
    current: str, examples: Sequence[Example], results: Sequence[ExampleResult], task: str
) -> list[ChatMessage]:
    """The chat asking what in the module made episodes fail (no code)."""
    content = _material(current, examples, results, task) + CRITIQUE
    return [{"role": "user", "content": content}]


@dataclass(frozen=True)
class ModuleReply:
    """A model's reply to ``code_messages``: the module, or why there is none."""

    reply: str
    text: str | None
    problem: str | None


async def ask_module(
    lm: LM, messages: list[ChatMessage], current: str, **params: Any
) -> ModuleReply:
    """Ask ``lm`` for a new module (``CODE_MAX_TOKENS`` unless given) and check the reply."""
    params.setdefault("max_tokens", CODE_MAX_TOKENS)
    completion = await lm.complete(messages, **params)
    text, problem = parse_code(completion.text, current)
    return ModuleReply(completion.text, text, problem)


def parse_code(reply: str, current: str) -> tuple[str | None, str | None]:
    """(module, None) or (None, why the reply is unusable). The module is the first of the
    python fences (last first), the other fences (last first) and the whole reply that
    compiles with ``run`` at module scope, less a leading "Change:" line; when none does,
    the reason is the first one's."""
    bodies = [*PYTHON_FENCE.findall(reply)[::-1], *FENCE.findall(reply)[::-1], reply]
    texts = [CHANGE_LINE.sub("", body).strip("\n") + "\n" for body in bodies]
    text = next((text for text in texts if code_problem(text) is None), None)
    if text is None:
        return None, code_problem(texts[0])
    if text.strip() == current.strip():
        return None, "the module is unchanged"
    return text, None


async def smoke_problem(
    system: System, candidate: Candidate, example: Example, lm: LM
) -> str | None:
    """Run ``candidate`` once on ``example``, unscored, when the system can (a harness):
    why its code is broken, or None."""
    smoke = getattr(system, "smoke_test", None)
    if smoke is None:
        return None
    problem: str | None = await smoke(candidate, RunContext(lm=lm, example=example, split="train"))
    return problem


async def smoke_rejection(ctx: SearchContext, candidate: Candidate, example: Example) -> str | None:
    """The reason to reject ``candidate`` before it is scored: its code crashed, raised,
    exited or hung on ``example`` with the task LM. None when it ran (or cannot be run)."""
    problem = await smoke_problem(ctx.system, candidate, example, ctx.lm("task"))
    return None if problem is None else f"{SMOKE_FAILED}{problem}"

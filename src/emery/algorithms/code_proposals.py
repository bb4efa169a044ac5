"""Proposals of whole harness modules (``code:*`` components): the reflection prompt, the
reply parsing with the compile check, and the smoke run a proposal passes before it is
scored on a minibatch. Shared by the search algorithms."""

from __future__ import annotations

import re
from collections.abc import Sequence

from emery.core.models import Candidate, ChatMessage, Example
from emery.evaluation.results import ExampleResult
from emery.lm.base import LM
from emery.systems.base import RunContext, System
from emery.systems.harness.code import code_problem
from emery.verifiers.base import as_text

CODE_PREFIX = "code:"
SHOWN_EPISODES = 4
TRACE_CHARS = 1200
INPUT_CHARS = 300
FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)

PROMPT = """\
You improve an agent loop written in Python. The module defines run(kit) -> str, the
episode's final answer. The kit offers:
- kit.complete(system, messages, temperature=None, max_tokens=512) -> str: one model call
- kit.execute(tool, arguments) -> Observation (.text, .ok, .done): one environment action
- kit.parse_tool_call(text) -> {{"tool", "arguments"}} or None; kit.tools_text();
  kit.skills_index(); kit.read_skill(name); kit.instruction; kit.system_prompt; kit.tools
Model calls and actions are capped per episode (BudgetExceeded ends the episode).
{task}
Current module:
```python
{code}
```

Episodes run with it (transcripts cut; stop reason and feedback at the end):
{episodes}

Write a better module: fix what made episodes fail (loop structure, retries after error
observations, nudges, when to submit, how observations are shown to the model). Keep
run(kit) at module scope. Reply with the whole new module in one ```python fence."""


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


def code_messages(
    current: str, examples: Sequence[Example], results: Sequence[ExampleResult], task: str
) -> list[ChatMessage]:
    """The reflection chat asking for a new module."""
    content = PROMPT.format(
        code=current.rstrip(),
        episodes=render_episodes(examples, results),
        task=f"The task: {task}\n" if task else "",
    )
    return [{"role": "user", "content": content}]


def parse_code(reply: str, current: str) -> tuple[str | None, str | None]:
    """(module, None) or (None, why the reply is unusable): the last python fence (or the
    whole reply when it has no fence), compiled, with ``run`` at module scope."""
    fences = FENCE.findall(reply)
    text = (fences[-1] if fences else reply).strip("\n") + "\n"
    problem = code_problem(text)
    if problem is not None:
        return None, problem
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

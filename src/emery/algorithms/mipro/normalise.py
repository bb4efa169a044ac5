"""Bootstrapped runs whose answer is right but whose reply format is wrong, made usable.

A small model often solves a problem and then ends its worked reply in its own way
(``\\(\\boxed{22}\\)``) instead of the line the stage's parser reads (``Answer: 22``). Such
a run fails, yet its reasoning is exactly the worked demo the model needs to see. When
the answer a reply ends with (its last ``\\boxed{}``, its last number, or its last line)
is accepted by the verifier against the gold output, the reply is normalised: the gold
output written in the stage's format is appended as its last line, and the normalised
reply must itself parse and pass. Only the last stage (whose output is the gold) is
normalised; a run whose earlier stages failed is not.
"""

from __future__ import annotations

import logging
import re
import statistics
from collections.abc import Mapping

from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.systems.base import ComponentCall
from emery.systems.capabilities import StagedPrompts
from emery.systems.formats import labeled_replies, parse_reply
from emery.systems.stages import StageConfig
from emery.verifiers.base import Verifier

log = logging.getLogger(__name__)

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def final_answers(reply: str) -> list[str]:
    """What ``reply`` may end with as its answer, most specific first, without repeats."""
    found: list[str] = []
    boxed = _BOXED.findall(reply)
    if boxed:
        found.append(boxed[-1].strip())
    numbers = _NUMBER.findall(reply)
    if numbers:
        found.append(numbers[-1].replace(",", ""))
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if lines:
        found.append(lines[-1])
    return [value for value in dict.fromkeys(found) if value]


async def _score(verifier: Verifier, example: Example, output: object) -> float:
    try:
        verdict = await verifier.verify(example, output, None)
    except Exception as exc:  # a verifier that cannot read this value: not a match
        log.debug("normalising %s: the verifier refused %r: %s", example.id, output, exc)
        return 0.0
    return verdict.score


async def normalised_reply(
    stage: StageConfig, reply: str, example: Example, verifier: Verifier, threshold: float
) -> tuple[str, float] | None:
    """``reply`` with the gold answer appended in the stage's format, and its score, when
    the answer the reply ends with already matches the gold output; else None."""
    if example.expected is None or not reply.strip():
        return None
    for value in final_answers(reply):
        if await _score(verifier, example, value) < threshold:
            continue
        for line in labeled_replies(stage, example.expected):
            fixed = f"{reply.rstrip()}\n{line}"
            ok, parsed = parse_reply(stage, fixed)
            score = await _score(verifier, example, parsed) if ok else 0.0
            if score >= threshold:
                return fixed, score
        return None
    return None


def _reads_back(stage: StageConfig, call: ComponentCall) -> bool:
    return call.error is None and parse_reply(stage, call.reply)[0]


async def normalise_run(
    program: StagedPrompts,
    result: ExampleResult,
    example: Example,
    verifier: Verifier,
    threshold: float,
) -> ExampleResult | None:
    """``result`` with its last stage's reply normalised (see the module docstring), or None
    when it needs no normalising or cannot be normalised."""
    last = program.config.stages[-1]
    stage_calls = [c for c in result.calls if c.component in program.stages]
    if not stage_calls or stage_calls[-1].component != last.name:
        return None
    if any(not _reads_back(program.stages[c.component], c) for c in stage_calls[:-1]):
        return None
    final = stage_calls[-1]
    if _reads_back(last, final) and result.error is None and result.score >= threshold:
        return None
    normalised = await normalised_reply(last, final.reply, example, verifier, threshold)
    if normalised is None:
        return None
    fixed, score = normalised
    calls = [*stage_calls[:-1], final.model_copy(update={"reply": fixed, "error": None})]
    return result.model_copy(update={"calls": calls, "error": None, "score": score})


async def reasoning_stages(
    program: StagedPrompts,
    results: list[ExampleResult],
    examples: Mapping[str, Example],
    verifier: Verifier,
    *,
    min_words: int = 20,
) -> list[str]:
    """The stages whose replies (in ``results``, the seed's) are worked answers.

    A stage reasons when its median reply runs over ``min_words`` words; the last stage
    (whose output is the gold) must also reach the gold answer at the end of at least one
    reply, so a model that rambles without working the task out is not taken for one that
    reasons (bare-answer demos still help the former).
    """
    last = program.config.stages[-1]
    found: list[str] = []
    for stage in program.config.stages:
        calls = [
            (result, call)
            for result in results
            for call in result.calls
            if call.component == stage.name and call.reply
        ]
        if not calls or statistics.median(len(c.reply.split()) for _, c in calls) <= min_words:
            continue
        if stage.name != last.name or await _reaches_gold(stage, calls, examples, verifier):
            found.append(stage.name)
    return found


async def _reaches_gold(
    stage: StageConfig,
    calls: list[tuple[ExampleResult, ComponentCall]],
    examples: Mapping[str, Example],
    verifier: Verifier,
) -> bool:
    for result, call in calls:
        example = examples.get(result.example_id)
        if example is None:
            continue
        if result.error is None and result.score >= 1.0:
            return True
        if await normalised_reply(stage, call.reply, example, verifier, 1.0) is not None:
            return True
    return False

"""A child whose only change is the answer stage takes its parent's readable runs.

The answer stage (``StageLayout``'s ``answer`` choice at ``restate``) sends a reply its
stage's parser cannot read back to the model; on a run where every reply was read it never
runs, so the child's run is its parent's, call for call. A child that differs from its one
parent only by turning the answer stage on (MIPRO's first trial, the seed's repair; GEPA's
``answer_stage`` operator child; MIPRO's restated winner) is therefore run only where the
parent's run is not stored, failed, or had a reply no parser read; everywhere else it takes
the parent's result as its own (the same rollout id: no rollout of its own ran), charged
nothing and stored with the step's other results, so a resumed search finds it. At a
sampling temperature the shared result is a draw the child's own first call could have
made; the pair then differs only where the answer stage acted, which is what the trial
asks.

``SearchContext.evaluate`` shares before it scores, so every algorithm's trials, minibatches
and races pay only for the runs the answer stage can change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Example, Split
from emery.evaluation.service import EvaluationService
from emery.systems.prompt_layout import CHOICE_SEPARATOR, AnswerStage

ANSWER = "answer"
"""The layout field of the answer stage (``StageLayout.answer``)."""
RESTATE: AnswerStage = "restate"
"""Its value when the answer stage is on."""


def restates_only(child: Candidate, parent: Candidate) -> bool:
    """Whether ``child`` is ``parent`` with the answer stage turned on in one or more
    stages and nothing else changed (texts, demos and every other layout choice equal)."""
    changed = {
        name
        for name in child.components.keys() | parent.components.keys()
        if child.components.get(name) != parent.components.get(name)
    }
    return (
        bool(changed)
        and all(_turns_restate_on(child, name) for name in changed)
        and _shown(child.demos) == _shown(parent.demos)
    )


def _turns_restate_on(child: Candidate, name: str) -> bool:
    """Whether component ``name`` is a stage's answer-stage choice, on in ``child``."""
    return name.partition(CHOICE_SEPARATOR)[2] == ANSWER and child.components.get(name) == RESTATE


def readable(result: ExampleResult) -> bool:
    """Whether ``result``'s run read every reply: no error, nothing unreadable, no call
    with an error, and its calls recorded (without them nothing shows it)."""
    return (
        result.error is None
        and result.unreadable is None
        and result.ranked is None
        and bool(result.calls)
        and all(call.error is None for call in result.calls)
    )


def share_readable_runs(
    evaluations: EvaluationService,
    candidates: Mapping[str, Candidate],
    candidate: Candidate,
    examples: Sequence[Example],
    split: Split,
) -> int:
    """Give ``candidate`` its one parent's readable results on ``examples`` where it has
    none and it only turns the answer stage on (module doc); how many were shared."""
    parents = candidate.lineage.parents
    if len(parents) != 1 or RESTATE not in candidate.components.values():
        return 0  # the common case on every evaluation: nothing to compare
    parent = candidates.get(parents[0])
    if parent is None or not restates_only(candidate, parent):
        return 0
    shared = []
    for example in examples:
        if evaluations.cached(candidate, example, split) is not None:
            continue
        result = evaluations.cached(parent, example, split)
        if result is not None and readable(result):
            shared.append(result)
    return evaluations.share(candidate, shared)


def _shown(demos: Mapping[str, Sequence[object]]) -> dict[str, tuple[object, ...]]:
    return {stage: tuple(shown) for stage, shown in demos.items() if shown}

"""Few-shot demo sets per stage: the original (or empty) set, a labeled set, bootstrapped sets.

Labeled demos are train examples' gold outputs written as replies (``algorithms.labeled``).

Bootstrapped demos come from rollouts of a *teacher*: the current program, helped (when
the settings allow) by the output-format sentence in its instructions and the labeled
demos in its prompt, so that bootstrapping still finds passing runs when the seed program
scores about 0. The teacher runs on shuffled train examples through the evaluation
service (cached and charged like every rollout); a run's per-stage inputs and replies
become demos only when the whole program's score reaches the threshold.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro.normalise import normalise_run
from emery.algorithms.mipro.state import DemoSet
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Demo, Example, Lineage
from emery.systems.capabilities import StagedPrompts
from emery.systems.demo_retrieval import NEAREST_SHOWN
from emery.systems.formats import format_sentence


def with_sentence(instruction: str, sentence: str | None) -> str:
    """``instruction`` followed by ``sentence``, unless it already says it."""
    if not sentence:
        return instruction
    marker = sentence.split("'")[1] if sentence.count("'") >= 2 else sentence
    if marker.split("<")[0].strip().lower() in instruction.lower():
        return instruction
    return f"{instruction.rstrip()} {sentence}".strip()


REASONING_SENTENCE = "Think it through step by step before you give the final reply."


def teacher_candidate(
    seed: Candidate,
    program: StagedPrompts,
    labeled: dict[str, list[Demo]],
    *,
    format_hint: bool,
    use_labeled: Literal["auto", "always", "never"],
    reasoning: bool,
    gold_example: object = None,
    reasoning_stages: frozenset[str] = frozenset(),
) -> Candidate:
    """The program that bootstraps: the seed plus reasoning and format sentences and, where
    the settings say so, labeled demos (see ``MiproSettings.teacher_*``). A stage in
    ``reasoning_stages`` (its replies are worked answers) never sees bare-answer demos:
    they would teach it to skip the work."""
    components = dict(seed.components)
    demos = dict(seed.demos)
    for stage in program.config.stages:
        instruction = components.get(stage.name, stage.instruction)
        sentence = format_sentence(stage, gold_example)
        if reasoning and stage.parser.kind in ("regex", "last_line"):
            instruction = with_sentence(instruction, REASONING_SENTENCE)
        if format_hint:
            instruction = with_sentence(instruction, sentence)
        components[stage.name] = instruction
        show_labeled = use_labeled == "always" or (use_labeled == "auto" and not sentence)
        bare = stage.name in reasoning_stages and not all(
            is_worked(d) for d in labeled.get(stage.name, [])
        )
        if show_labeled and labeled.get(stage.name) and not bare:
            demos[stage.name] = tuple(labeled[stage.name])
    if components == seed.components and demos == seed.demos:
        return seed
    return Candidate(
        components=components,
        demos=demos,
        lineage=Lineage(parents=(seed.id,), generation=1, operation="mipro.teacher"),
    )


def is_worked(demo: Demo) -> bool:
    """Whether a demo's reply shows work (more than one line), not only the answer."""
    return len([line for line in demo.output.splitlines() if line.strip()]) > 1


@dataclass
class BootstrapRun:
    """What running the teacher produced: rollouts run and the passing results, in order;
    ``normalised`` of them passed only once their reply was put into the stage's format."""

    runs: int = 0
    passing: list[ExampleResult] = field(default_factory=list)
    normalised: int = 0


async def run_teacher(
    ctx: SearchContext,
    teacher: Candidate,
    pool: list[Example],
    *,
    wanted: int,
    allowance: int,
    threshold: float,
    normalise: bool = True,
) -> BootstrapRun:
    """Run ``teacher`` on ``pool`` in order, in chunks, until ``wanted`` runs pass (a run
    whose answer is right in the wrong format counts once normalised, see ``normalise``)."""
    outcome = BootstrapRun()
    position = 0
    while len(outcome.passing) < wanted and position < len(pool) and outcome.runs < allowance:
        size = min(max(wanted - len(outcome.passing), 4), allowance - outcome.runs)
        remaining = ctx.budget.remaining_metric_calls()
        if remaining is not None:
            size = min(size, remaining)
        chunk = pool[position : position + size]
        if not chunk:
            break
        position += len(chunk)
        result = await ctx.evaluate(teacher, chunk, "train")
        outcome.runs += len(chunk)
        await _keep_passing(ctx, outcome, chunk, result.results, threshold, normalise)
    return outcome


async def _keep_passing(
    ctx: SearchContext,
    outcome: BootstrapRun,
    chunk: list[Example],
    results: list[ExampleResult],
    threshold: float,
    normalise: bool,
) -> None:
    examples = {example.id: example for example in chunk}
    verifier = ctx.evaluations.evaluator.verifier
    program = ctx.system
    for result in results:
        fixed = None
        if normalise and isinstance(program, StagedPrompts) and result.example_id in examples:
            example = examples[result.example_id]
            fixed = await normalise_run(program, result, example, verifier, threshold)
        if fixed is not None:
            outcome.passing.append(fixed)
            outcome.normalised += 1
        elif result.error is None and result.score >= threshold:
            outcome.passing.append(result)


def run_demos(result: ExampleResult) -> dict[str, Demo]:
    """Each stage's demo from one passing run: the stage's inputs and its reply."""
    return {
        call.component: Demo(
            inputs=call.inputs,
            output=call.reply,
            source="bootstrapped",
            example_id=result.example_id,
        )
        for call in result.calls
        if call.error is None and call.reply.strip()
    }


def bootstrapped_sets(
    stages: list[str],
    passing: list[ExampleResult],
    *,
    count: int,
    max_demos: int,
    rng: random.Random,
) -> dict[str, list[list[Demo]]]:
    """``count`` demo sets per stage from the passing runs.

    The first set takes the first ``max_demos`` runs; the others a random sample of a
    random size in [1, max_demos], so the sets differ in which and how many demos they hold.
    """
    sets: dict[str, list[list[Demo]]] = {stage: [] for stage in stages}
    if not passing or max_demos == 0:
        return sets
    per_run = [run_demos(result) for result in passing]
    for index in range(count):
        if index == 0:
            chosen = per_run[:max_demos]
        else:
            size = rng.randint(1, min(max_demos, len(per_run)))
            chosen = rng.sample(per_run, size)
        for stage in stages:
            sets[stage].append([demos[stage] for demos in chosen if stage in demos])
    return sets


def assemble(
    original: tuple[Demo, ...],
    labeled: list[Demo],
    bootstrapped: list[list[Demo]],
    *,
    limit: int,
    reasoning: bool = False,
    nearest: list[Demo] | None = None,
) -> list[DemoSet]:
    """A stage's choices without duplicates: original (or empty), empty, labeled,
    bootstrapped, at most ``limit`` of them; then, beyond the limit, the labeled pool
    shown ``nearest`` per input (when it holds more demos than one input sees).

    For a ``reasoning`` stage (its replies are worked answers), bare-answer labeled demos
    are offered only beside bootstrapped (worked) sets, never as its only demo set.
    """
    choices = [DemoSet(kind="original" if original else "empty", demos=list(original))]
    if original:
        choices.append(DemoSet(kind="empty"))
    pool = nearest or []
    bare = reasoning and not all(is_worked(d) for d in labeled + pool)
    if labeled and not (bare and not any(bootstrapped)):
        choices.append(DemoSet(kind="labeled", demos=labeled))
    for demos in bootstrapped:
        if demos:
            choices.append(DemoSet(kind="bootstrapped", demos=demos))
    unique: list[DemoSet] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for choice in choices:
        key = tuple((repr(sorted(d.inputs.items())), d.output) for d in choice.demos)
        if key in seen:
            continue
        seen.add(key)
        unique.append(choice)
    unique = unique[: max(limit, 1)]
    if len(pool) > NEAREST_SHOWN and not (bare and not any(bootstrapped)):
        unique.append(DemoSet(kind="nearest", demos=pool))
    return unique

"""Labeled demos: a train example's gold output written as a reply the stage would give.

Labeled demos exist only for a stage whose output is the program's output (the last stage)
and whose messages read nothing but example fields: an intermediate stage has no gold, and
a last stage that reads an earlier stage's output needs that output, which only a run
produces. The gold is written as a reply the stage's parser reads back and the verifier
accepts (see ``systems.formats``), after the example's rationale when the dataset has one.

MIPRO offers a labeled set and the nearest-per-input choice over the whole pool as demo
choices; GEPA and APO keep a pool of them (``labeled_pool``) for the ``labeled_demos``
edit operator, which picks a few whose examples are not in the minibatch being judged
(``pick_demos``), and the ``nearest_demos`` operator, which hands the stage the pool.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from emery.algorithms.base import SearchContext
from emery.core.models import Demo, Example
from emery.systems.capabilities import StagedPrompts
from emery.systems.formats import labeled_replies, parse_reply
from emery.systems.stages import StageConfig
from emery.systems.templates import placeholders
from emery.verifiers.base import Verifier

log = logging.getLogger(__name__)

POOL_SIZE = 64
"""Labeled demos kept per stage: a pool the ``nearest_demos`` choice draws from per input
(the more train examples it holds, the closer the nearest), and that leaves a few after
excluding any minibatch."""


def labeled_stage(program: StagedPrompts, input_fields: set[str]) -> tuple[str | None, str]:
    """The stage that can take labeled demos (or None) and why."""
    last = program.config.stages[-1]
    reads = set().union(*(placeholders(m.template) for m in last.messages))
    earlier = {stage.output_field for stage in program.config.stages[:-1]}
    if reads & earlier:
        return None, (
            f"stage {last.name!r} reads earlier stage outputs"
            f" ({', '.join(sorted(reads & earlier))}) that have no gold: no labeled demos"
        )
    if not reads <= input_fields:
        return None, f"stage {last.name!r} reads fields the examples lack: no labeled demos"
    note = f"labeled demos for stage {last.name!r} (the last stage: its output is the gold)"
    if len(program.config.stages) > 1:
        note += "; earlier stages have no gold outputs"
    return last.name, note


async def labeled_demos(
    program: StagedPrompts,
    stage: StageConfig,
    examples: list[Example],
    verifier: Verifier,
    *,
    limit: int,
    threshold: float,
) -> list[Demo]:
    """Up to ``limit`` demos whose reply is the gold output in the stage's format."""
    demos: list[Demo] = []
    for example in examples:
        if len(demos) >= limit:
            break
        if example.expected is None:
            continue
        reply = await _accepted_reply(stage, example, verifier, threshold)
        rationale = str(example.meta.get("rationale") or "").strip()
        if reply is not None and rationale:
            reply = f"{rationale}\n{reply}"
        if reply is not None:
            demos.append(
                Demo(
                    inputs=program.stage_inputs(stage, example.input),
                    output=reply,
                    source="labeled",
                    example_id=example.id,
                )
            )
    return demos


async def _accepted_reply(
    stage: StageConfig, example: Example, verifier: Verifier, threshold: float
) -> str | None:
    for reply in labeled_replies(stage, example.expected):
        parsed_ok, parsed = parse_reply(stage, reply)
        if not parsed_ok:
            continue
        try:
            verdict = await verifier.verify(example, parsed, None)
        except Exception as exc:  # a verifier that cannot score this gold: no demo from it
            log.debug("labeled demo for %s rejected by the verifier: %s", example.id, exc)
            continue
        if verdict.score >= threshold:
            return reply
    return None


def input_fields(ctx: SearchContext) -> list[str]:
    """The input fields every example of the dataset has, in the first example's order."""
    examples = list(ctx.dataset)
    if not examples:
        return []
    shared = set.intersection(*(set(example.input) for example in examples))
    return [name for name in examples[0].input if name in shared]


async def labeled_pool(ctx: SearchContext, size: int = POOL_SIZE) -> dict[str, list[Demo]]:
    """Up to ``size`` labeled demos from train for the stage that can take them (none for a
    system that is not a prompt program, or whose last stage reads earlier outputs)."""
    program = ctx.system if isinstance(ctx.system, StagedPrompts) else None
    if program is None or size <= 0:
        return {}
    stage, _ = labeled_stage(program, set(input_fields(ctx)))
    if stage is None:
        return {}
    verifier = ctx.evaluations.evaluator.verifier
    demos = await labeled_demos(
        program, program.stages[stage], ctx.train, verifier, limit=size, threshold=1.0
    )
    return {stage: demos} if demos else {}


def pick_demos(pool: Sequence[Demo], count: int, exclude: Collection[str]) -> tuple[Demo, ...]:
    """``count`` demos from ``pool`` whose examples are not in ``exclude``: distinct replies
    first (for a classifier, one demo per label before a second of any), in pool order."""
    usable = [demo for demo in pool if demo.example_id not in exclude]
    picked: list[Demo] = []
    seen: set[str] = set()
    for demo in usable:
        if len(picked) < count and demo.output not in seen:
            picked.append(demo)
            seen.add(demo.output)
    for demo in usable:
        if len(picked) < count and demo not in picked:
            picked.append(demo)
    return tuple(picked)

"""LM-free edit operators: small, known-good changes to a prompt-program stage.

A weak proposer model (the same 0.5B model as the task, on a laptop) often returns answers,
fragments or copies instead of instructions. These operators need no model: each makes one
structural or wording change that often helps a small model follow its task and format
(a restating answer stage, which only ever raises a score; the format sentence as the last
line of the user turn; the instruction moved next to the input, a step-by-step cue, a terse-answer
style, demos inline,
labeled demos from train when the stage has none, or the train pool with the nearest few
shown per input, fewer or reordered demos (or fewer of the nearest), a shortened
instruction). Algorithms use them beside (and
instead of, when it runs dry) their LM proposals; every child says which operator made it
(``lineage.operation = "operator.<name>"``) so acceptance can be counted per source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from emery.algorithms.labeled import pick_demos
from emery.core.models import Candidate, Demo, Lineage
from emery.systems.capabilities import StagedPrompts
from emery.systems.demo_retrieval import NEAREST_SHOWN
from emery.systems.formats import format_sentence, reply_format
from emery.systems.prompt_layout import StageLayout, with_layout
from emery.systems.stages import StageConfig

STEP_CUE = "Think step by step, then give the final answer."
TERSE_CUE = "Reply with the final answer only, with no explanation."
OPERATOR_PREFIX = "operator."
LABELED_DEMOS = 4
"""Labeled demos the ``labeled_demos`` operator adds (MIPRO's default labeled set size)."""


@dataclass(frozen=True)
class Edit:
    """What an operator changes in one stage: its instruction, layout and demos."""

    instruction: str
    layout: StageLayout
    demos: tuple[Demo, ...]


@dataclass(frozen=True)
class Materials:
    """What an operator may draw on besides the parent: labeled demos per stage (from
    train, see ``labeled.labeled_pool``) and the ids of examples a child must not show as
    demos (the minibatch it will be judged on)."""

    labeled: Mapping[str, Sequence[Demo]] = field(default_factory=dict)
    exclude: frozenset[str] = frozenset()


NO_MATERIALS = Materials()
EditFn = Callable[[Edit, StageConfig, Materials], Edit | None]


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def _append(instruction: str, sentence: str) -> str | None:
    if sentence.lower().rstrip(".") in instruction.lower():
        return None
    return f"{instruction.rstrip()} {sentence}".strip()


def format_reminder(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """The output-format sentence as the last line of the user turn."""
    sentence = format_sentence(stage)
    if not sentence or edit.layout.reminder == sentence:
        return None
    return Edit(edit.instruction, edit.layout.model_copy(update={"reminder": sentence}), edit.demos)


def _placed(where: str) -> EditFn:
    def place(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
        if not edit.instruction.strip() or edit.layout.placement == where:
            return None
        return Edit(
            edit.instruction, edit.layout.model_copy(update={"placement": where}), edit.demos
        )

    return place


def step_by_step(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """A step-by-step cue, for stages whose parser reads a part of a longer reply."""
    if not reply_format(stage.parser).reads_part:
        return None
    text = _append(edit.instruction, STEP_CUE)
    return None if text is None else Edit(text, edit.layout, edit.demos)


def terse(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """Ask for the bare answer (in the required format when the parser has one)."""
    sentence = format_sentence(stage)
    cue = TERSE_CUE if not sentence else f"{TERSE_CUE} {sentence}"
    text = _append(edit.instruction.replace(STEP_CUE, "").strip(), cue)
    return None if text is None else Edit(text, edit.layout, edit.demos)


def answer_stage(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """A second call that restates an unreadable reply's answer in the required format.

    It runs only on a reply the stage's parser cannot read, which scores 0 without it, so
    it can raise a score and never lower one; its cost is one call per unreadable reply.
    """
    if stage.parser.kind == "raw" or edit.layout.answer == "restate":
        return None
    return Edit(edit.instruction, edit.layout.model_copy(update={"answer": "restate"}), edit.demos)


def inline_demos(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """Demos as worked examples inside the user turn instead of chat turns."""
    if not edit.demos or edit.layout.demos == "inline":
        return None
    return Edit(edit.instruction, edit.layout.model_copy(update={"demos": "inline"}), edit.demos)


def add_labeled_demos(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """A few labeled demos (train examples' gold replies, distinct replies first) for a
    stage that shows none; never an example in ``materials.exclude``."""
    if edit.demos:
        return None
    pool = materials.labeled.get(stage.name, ())
    demos = pick_demos(pool, LABELED_DEMOS, materials.exclude)
    return Edit(edit.instruction, edit.layout, demos) if demos else None


def add_nearest_demos(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """The labeled pool (less ``materials.exclude``) as demos of a stage that shows none,
    of which each input sees only the few nearest to it (``demo_retrieval``)."""
    if edit.demos:
        return None
    pool = materials.labeled.get(stage.name, ())
    demos = tuple(demo for demo in pool if demo.example_id not in materials.exclude)
    if len(demos) <= NEAREST_SHOWN:
        return None  # no choice to make: labeled_demos shows them all
    return Edit(edit.instruction, edit.layout.model_copy(update={"select": "nearest"}), demos)


def fewer_demos(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """Drop the last demo, or show one fewer of a pool's nearest per input (shorter
    prompts; a demo can mislead as well as teach)."""
    if not edit.demos:
        return None
    if edit.layout.select == "all":
        return Edit(edit.instruction, edit.layout, edit.demos[:-1])
    if edit.layout.shown <= 1:
        return None
    fewer = edit.layout.model_copy(update={"shown": edit.layout.shown - 1})
    return Edit(edit.instruction, fewer, edit.demos)


def reverse_demos(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """The demos in the opposite order (the last demo weighs most on a small model)."""
    if len(edit.demos) < 2 or edit.layout.select == "nearest":
        return None
    return Edit(edit.instruction, edit.layout, tuple(reversed(edit.demos)))


def shorten(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """Keep the instruction's first sentence and its format sentence (if it had one)."""
    sentences = _sentences(edit.instruction)
    if len(sentences) < 3:
        return None
    sentence = format_sentence(stage)
    kept = [sentences[0]]
    if sentence and sentence.lower() in edit.instruction.lower():
        kept.append(sentence)
    return Edit(" ".join(kept), edit.layout, edit.demos)


# The order is the order of preference when an algorithm offers only a few children: the
# answer stage first (it can only help), then the format reminder, which changes every
# reply (a small model told to end with a format line may skip its reasoning and guess).
OPERATORS: dict[str, EditFn] = {
    "answer_stage": answer_stage,
    "format_reminder": format_reminder,
    "nearest_demos": add_nearest_demos,
    "labeled_demos": add_labeled_demos,
    "instruction_after_input": _placed("user_after"),
    "instruction_before_input": _placed("user_before"),
    "step_by_step": step_by_step,
    "terse": terse,
    "inline_demos": inline_demos,
    "fewer_demos": fewer_demos,
    "reverse_demos": reverse_demos,
    "shorten": shorten,
}
COST_CUTTERS: tuple[str, ...] = ("fewer_demos", "shorten")
"""The operators whose child sends fewer tokens per call than its parent."""


def operator_order(cost_first: bool) -> tuple[str, ...]:
    """The operators in the order they are offered: ``OPERATORS``' order, or with the cost
    cutters first (a job that names a cost among its objectives, whose search keeps a
    cheaper child that is as good)."""
    rest = tuple(name for name in OPERATORS if not cost_first or name not in COST_CUTTERS)
    return (COST_CUTTERS if cost_first else ()) + rest


def current_edit(candidate: Candidate, stage: StageConfig) -> Edit:
    """What ``candidate`` holds for ``stage``."""
    return Edit(
        candidate.components.get(stage.name, stage.instruction),
        StageLayout.of(candidate.components, stage.name),
        tuple(candidate.demos.get(stage.name, ())),
    )


def apply_operator(
    name: str,
    candidate: Candidate,
    program: StagedPrompts,
    stage_name: str,
    *,
    iteration: int | None = None,
    materials: Materials = NO_MATERIALS,
) -> Candidate | None:
    """The child ``name`` makes of ``candidate`` in ``stage_name``, or None if it does not apply."""
    stage = program.stages[stage_name]
    before = current_edit(candidate, stage)
    after = OPERATORS[name](before, stage, materials)
    if after is None or after == before:
        return None
    components = with_layout(candidate.components, stage_name, after.layout)
    components[stage_name] = after.instruction
    demos = dict(candidate.demos)
    if after.demos:
        demos[stage_name] = after.demos
    else:
        demos.pop(stage_name, None)
    return Candidate(
        components=components,
        demos=demos,
        lineage=Lineage(
            parents=(candidate.id,),
            generation=candidate.lineage.generation + 1,
            operation=f"{OPERATOR_PREFIX}{name}",
            iteration=iteration,
            details={"stage": stage_name, "operator": name},
        ),
    )


def operator_children(
    candidate: Candidate,
    program: StagedPrompts,
    stage_name: str,
    *,
    tried: set[str] | frozenset[str] = frozenset(),
    iteration: int | None = None,
    materials: Materials = NO_MATERIALS,
    order: Sequence[str] = tuple(OPERATORS),
) -> list[Candidate]:
    """Every applicable operator's child of ``candidate`` in one stage, in ``order``,
    skipping children whose ids are in ``tried``."""
    children = []
    for name in order:
        child = apply_operator(
            name, candidate, program, stage_name, iteration=iteration, materials=materials
        )
        if child is not None and child.id not in tried:
            children.append(child)
    return children

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

Each operator is an ``OperatorKind`` in ``EDIT_OPERATORS`` (``core/plugins.py``), so GEPA's
``operators`` setting names the ones it offers, in order: built-in names, a
``"module:attr"`` of your own, or an entry point of the ``emery.edit_operators`` group.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from emery.algorithms.labeled import pick_demos
from emery.core.models import Candidate, Demo, Lineage
from emery.core.plugins import PluginRegistry
from emery.systems.capabilities import StagedPrompts
from emery.systems.demo_retrieval import NEAREST_SHOWN
from emery.systems.formats import format_sentence, reply_format
from emery.systems.prompt_layout import StageLayout, with_layout
from emery.systems.stages import StageConfig

STEP_CUE = "Think step by step, then give the final answer."
TERSE_CUE = "Reply with the final answer only, with no explanation."
OPERATOR_PREFIX = "operator."
LABELED_DEMO_COUNT = 4
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
    demos = pick_demos(pool, LABELED_DEMO_COUNT, materials.exclude)
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


@dataclass(frozen=True)
class OperatorKind:
    """An edit operator: ``edit(edit, stage, materials)`` returns the stage changed, or
    None where the operator does not apply (its child's lineage says
    ``operator.<name>``); ``cuts_cost``: its child sends fewer tokens per call than its
    parent, so a job that names a cost is offered it first."""

    name: str
    edit: EditFn
    cuts_cost: bool = False


ANSWER_STAGE = OperatorKind("answer_stage", answer_stage)
FORMAT_REMINDER = OperatorKind("format_reminder", format_reminder)
NEAREST_DEMOS = OperatorKind("nearest_demos", add_nearest_demos)
LABELED_DEMOS = OperatorKind("labeled_demos", add_labeled_demos)
INSTRUCTION_AFTER_INPUT = OperatorKind("instruction_after_input", _placed("user_after"))
INSTRUCTION_BEFORE_INPUT = OperatorKind("instruction_before_input", _placed("user_before"))
STEP_BY_STEP = OperatorKind("step_by_step", step_by_step)
TERSE = OperatorKind("terse", terse)
INLINE_DEMOS = OperatorKind("inline_demos", inline_demos)
FEWER_DEMOS = OperatorKind("fewer_demos", fewer_demos, cuts_cost=True)
REVERSE_DEMOS = OperatorKind("reverse_demos", reverse_demos)
SHORTEN = OperatorKind("shorten", shorten, cuts_cost=True)

# The order is the order of preference when an algorithm offers only a few children: the
# answer stage first (it can only help), then the format reminder, which changes every
# reply (a small model told to end with a format line may skip its reasoning and guess).
OPERATOR_KINDS: tuple[OperatorKind, ...] = (
    ANSWER_STAGE,
    FORMAT_REMINDER,
    NEAREST_DEMOS,
    LABELED_DEMOS,
    INSTRUCTION_AFTER_INPUT,
    INSTRUCTION_BEFORE_INPUT,
    STEP_BY_STEP,
    TERSE,
    INLINE_DEMOS,
    FEWER_DEMOS,
    REVERSE_DEMOS,
    SHORTEN,
)
OPERATORS: dict[str, EditFn] = {kind.name: kind.edit for kind in OPERATOR_KINDS}
"""The built-in operators by name, in their order of preference."""
COST_CUTTERS: tuple[str, ...] = tuple(kind.name for kind in OPERATOR_KINDS if kind.cuts_cost)
"""The built-in operators whose child sends fewer tokens per call than its parent."""

EDIT_OPERATORS = PluginRegistry(
    what="edit operator",
    plural="edit operators",
    where="algorithm.gepa.operators",
    builtins={kind.name: f"{__name__}:{kind.name.upper()}" for kind in OPERATOR_KINDS},
    attribute="OPERATOR",
    group="emery.edit_operators",
    type=OperatorKind,
)


def edit_operators(names: Sequence[str] | None) -> tuple[OperatorKind, ...]:
    """The operators ``names`` name, in that order (None: the built-ins)."""
    if names is None:
        return OPERATOR_KINDS
    return tuple(EDIT_OPERATORS.get(name) for name in dict.fromkeys(names))


def ordered_operators(
    operators: Sequence[OperatorKind], cost_first: bool
) -> tuple[OperatorKind, ...]:
    """``operators`` in the order they are offered: as given, or with the cost cutters
    first (a job that names a cost among its objectives, whose search keeps a cheaper
    child that is as good)."""
    cutters = tuple(kind for kind in operators if cost_first and kind.cuts_cost)
    return cutters + tuple(kind for kind in operators if not (cost_first and kind.cuts_cost))


def operator_order(cost_first: bool) -> tuple[str, ...]:
    """The built-in operators' names in the order they are offered (``ordered_operators``)."""
    return tuple(kind.name for kind in ordered_operators(OPERATOR_KINDS, cost_first))


def current_edit(candidate: Candidate, stage: StageConfig) -> Edit:
    """What ``candidate`` holds for ``stage``."""
    return Edit(
        candidate.components.get(stage.name, stage.instruction),
        StageLayout.of(candidate.components, stage.name),
        tuple(candidate.demos.get(stage.name, ())),
    )


def apply_operator(
    operator: str | OperatorKind,
    candidate: Candidate,
    program: StagedPrompts,
    stage_name: str,
    *,
    iteration: int | None = None,
    materials: Materials = NO_MATERIALS,
) -> Candidate | None:
    """The child ``operator`` (an ``OperatorKind``, or a name ``EDIT_OPERATORS`` knows)
    makes of ``candidate`` in ``stage_name``, or None if it does not apply."""
    kind = operator if isinstance(operator, OperatorKind) else EDIT_OPERATORS.get(operator)
    name = kind.name
    stage = program.stages[stage_name]
    before = current_edit(candidate, stage)
    after = kind.edit(before, stage, materials)
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
    order: Sequence[str | OperatorKind] = OPERATOR_KINDS,
) -> list[Candidate]:
    """Every applicable operator's child of ``candidate`` in one stage, in ``order``,
    skipping children whose ids are in ``tried``."""
    children = []
    for operator in order:
        child = apply_operator(
            operator, candidate, program, stage_name, iteration=iteration, materials=materials
        )
        if child is not None and child.id not in tried:
            children.append(child)
    return children

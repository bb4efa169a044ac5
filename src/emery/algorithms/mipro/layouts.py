"""MIPRO's structural choices per stage: layouts and operator-made instruction variants.

TPE searches a stage's layout (where the instruction sits, a format reminder as the last
line of the user turn, inline or chat demos) beside its instruction and demo set. The
layouts are built by the LM-free edit operators from the seed's own layout, so they need no
proposer call and exist even when every LM proposal is rejected.

Every layout beyond the seed's has the restating answer stage (``answer_stage``): it runs
only on a reply the stage's parser cannot read, which scores 0 without it, so it can raise
a score and never lower one (its cost is one more call per unreadable reply). The format
reminder changes every reply instead (told to end with a format line, a 0.5B model skipped
its reasoning and guessed on SVAMP), so it is a choice of its own. The first of these
layouts, the seed with only the answer stage added, is MIPRO's first trial.
"""

from __future__ import annotations

from emery.algorithms.mipro.state import InstructionChoice, LayoutChoice
from emery.algorithms.operators import NO_MATERIALS, OPERATORS, Edit
from emery.core.models import Demo
from emery.systems.prompt_layout import StageLayout
from emery.systems.stages import StageConfig

# Each layout choice is the seed layout with these operators applied in order.
LAYOUT_RECIPES: tuple[tuple[str, ...], ...] = (
    ("answer_stage",),
    ("format_reminder", "answer_stage"),
    ("instruction_after_input", "answer_stage"),
    ("inline_demos", "answer_stage"),
    ("inline_demos", "format_reminder", "answer_stage"),
)
# Instruction variants made from each LM-free operator that changes wording.
INSTRUCTION_OPERATORS: tuple[str, ...] = ("step_by_step", "terse", "shorten")
_ANY_DEMO = Demo(inputs={}, output="")


def _applied(edit: Edit, stage: StageConfig, recipe: tuple[str, ...]) -> Edit | None:
    changed = False
    for name in recipe:
        after = OPERATORS[name](edit, stage, NO_MATERIALS)
        if after is not None:
            edit, changed = after, True
    return edit if changed else None


def layout_choices(stage: StageConfig, seed_layout: StageLayout) -> list[LayoutChoice]:
    """The seed's layout first, then each recipe's distinct result."""
    # inline_demos applies only when the edit holds demos: a placeholder demo stands for
    # "whatever demo set TPE picks" (an empty set renders the same either way).
    probe = Edit(stage.instruction or "instruction", seed_layout, demos=(_ANY_DEMO,))
    choices = [LayoutChoice(layout=seed_layout)]
    for recipe in LAYOUT_RECIPES:
        edit = _applied(probe, stage, recipe)
        if edit is not None and all(edit.layout != c.layout for c in choices):
            choices.append(LayoutChoice(layout=edit.layout, source="+".join(recipe)))
    return choices


def instruction_variants(
    stage: StageConfig, choices: list[InstructionChoice]
) -> list[InstructionChoice]:
    """Operator-made variants of the original (and format-hinted) instructions, new ones only."""
    known = {choice.text for choice in choices}
    variants: list[InstructionChoice] = []
    for choice in choices:
        if choice.source not in ("original", "format_hint"):
            continue
        for name in INSTRUCTION_OPERATORS:
            edit = OPERATORS[name](Edit(choice.text, StageLayout(), ()), stage, NO_MATERIALS)
            if edit is None or edit.instruction in known:
                continue
            known.add(edit.instruction)
            variants.append(InstructionChoice(text=edit.instruction, source="operator", tip=name))
    return variants

"""LM-free edit operators: each makes one known change to a stage, or none when it cannot."""

from __future__ import annotations

import pytest

from emery.algorithms.operators import (
    OPERATORS,
    STEP_CUE,
    TERSE_CUE,
    apply_operator,
    operator_children,
)
from emery.core.models import Candidate, Demo
from emery.systems import (
    MessageTemplate,
    ParserConfig,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.systems.prompt_layout import StageLayout

FORMAT = "End your reply with a final line of the form 'Answer: <number>'."
DEMOS = (
    Demo(inputs={"question": "1+1?"}, output="Answer: 2"),
    Demo(inputs={"question": "2+2?"}, output="Answer: 4"),
)


def program(parser: ParserConfig | None = None) -> PromptProgram:
    stage = StageConfig(
        name="solve",
        instruction="Solve the problem.",
        messages=[MessageTemplate(template="{question}")],
        parser=parser or ParserConfig(kind="regex", pattern=r"Answer:\s*(-?\d+)"),
    )
    return PromptProgram(PromptProgramConfig(stages=[stage]))


SEED = Candidate(components={"solve": "Solve the problem."}, demos={"solve": DEMOS})


def child(name: str, seed: Candidate = SEED, parser: ParserConfig | None = None) -> Candidate:
    made = apply_operator(name, seed, program(parser), "solve", iteration=3)
    assert made is not None, name
    assert made.lineage.operation == f"operator.{name}"
    assert made.lineage.parents == (seed.id,)
    assert made.id != seed.id
    return made


def test_format_reminder_goes_last_in_the_user_turn() -> None:
    made = child("format_reminder")
    assert StageLayout.of(made.components, "solve").reminder == FORMAT
    assert made.components["solve"] == "Solve the problem."


def test_placements_move_the_instruction() -> None:
    assert StageLayout.of(child("instruction_after_input").components, "solve").placement == (
        "user_after"
    )
    assert StageLayout.of(child("instruction_before_input").components, "solve").placement == (
        "user_before"
    )


def test_wording_operators() -> None:
    assert child("step_by_step").components["solve"] == f"Solve the problem. {STEP_CUE}"
    assert child("terse").components["solve"] == f"Solve the problem. {TERSE_CUE} {FORMAT}"
    long = SEED.derive(
        components={"solve": f"Solve it. Read twice. Check units. {FORMAT}"}, lineage=SEED.lineage
    )
    assert child("shorten", long).components["solve"] == f"Solve it. {FORMAT}"


def test_demo_operators() -> None:
    assert child("fewer_demos").demos["solve"] == DEMOS[:1]
    assert child("reverse_demos").demos["solve"] == tuple(reversed(DEMOS))
    assert StageLayout.of(child("inline_demos").components, "solve").demos == "inline"
    assert child("answer_stage").components["solve:answer"] == "restate"


def test_operators_that_do_not_apply_return_none() -> None:
    raw = ParserConfig(kind="raw")
    bare = Candidate(components={"solve": "Solve the problem."})
    p = program(raw)
    for name in ("format_reminder", "step_by_step", "answer_stage"):
        assert apply_operator(name, bare, p, "solve") is None, name
    for name in ("inline_demos", "fewer_demos", "reverse_demos", "shorten"):
        assert apply_operator(name, bare, program(), "solve") is None, name


def test_an_operator_applied_twice_changes_nothing_more() -> None:
    once = child("format_reminder")
    assert apply_operator("format_reminder", once, program(), "solve") is None


def test_children_skip_tried_ids_and_are_distinct() -> None:
    children = operator_children(SEED, program(), "solve")
    assert len({c.id for c in children}) == len(children) == len(OPERATORS) - 1  # no shorten
    again = operator_children(SEED, program(), "solve", tried={children[0].id})
    assert [c.id for c in again] == [c.id for c in children[1:]]


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator_children_run(name: str) -> None:
    made = apply_operator(name, SEED, program(), "solve")
    assert made is None or made.lineage.details == {"stage": "solve", "operator": name}

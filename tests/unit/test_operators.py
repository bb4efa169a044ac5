"""LM-free edit operators: each makes one known change to a stage, or none when it cannot."""

from __future__ import annotations

import pytest

from emery.algorithms.labeled import pick_demos
from emery.algorithms.operators import (
    LABELED_DEMO_COUNT,
    OPERATORS,
    STEP_CUE,
    TERSE_CUE,
    Materials,
    apply_operator,
    operator_children,
    operator_order,
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


def test_answer_stage_restates_unreadable_replies_and_keeps_the_prompt() -> None:
    made = child("answer_stage")
    layout = StageLayout.of(made.components, "solve")
    assert (layout.reminder, layout.answer) == ("", "restate")
    assert made.components["solve"] == "Solve the problem."


def test_format_reminder_is_the_last_line_of_the_user_turn() -> None:
    layout = StageLayout.of(child("format_reminder").components, "solve")
    assert (layout.reminder, layout.answer) == (FORMAT, "off")


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


def test_operators_that_do_not_apply_return_none() -> None:
    raw = ParserConfig(kind="raw")
    bare = Candidate(components={"solve": "Solve the problem."})
    p = program(raw)
    for name in ("answer_stage", "format_reminder", "step_by_step"):
        assert apply_operator(name, bare, p, "solve") is None, name
    for name in ("inline_demos", "fewer_demos", "reverse_demos", "shorten"):
        assert apply_operator(name, bare, program(), "solve") is None, name


def test_an_operator_applied_twice_changes_nothing_more() -> None:
    for name in ("answer_stage", "format_reminder"):
        assert apply_operator(name, child(name), program(), "solve") is None, name


def test_children_skip_tried_ids_and_are_distinct() -> None:
    children = operator_children(SEED, program(), "solve")
    # no shorten (one sentence), no labeled or nearest demos (the seed has demos, and no
    # pool is given)
    assert len({c.id for c in children}) == len(children) == len(OPERATORS) - 3
    again = operator_children(SEED, program(), "solve", tried={children[0].id})
    assert [c.id for c in again] == [c.id for c in children[1:]]


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator_children_run(name: str) -> None:
    made = apply_operator(name, SEED, program(), "solve")
    assert made is None or made.lineage.details == {"stage": "solve", "operator": name}


def labeled(label: str, example_id: str) -> Demo:
    return Demo(
        inputs={"question": example_id}, output=label, source="labeled", example_id=example_id
    )


POOL = (
    labeled("Answer: 1", "a"),
    labeled("Answer: 1", "b"),
    labeled("Answer: 2", "c"),
    labeled("Answer: 3", "d"),
    labeled("Answer: 3", "e"),
    labeled("Answer: 4", "f"),
)


def test_pick_demos_takes_distinct_replies_first_and_never_an_excluded_example() -> None:
    assert [d.example_id for d in pick_demos(POOL, 4, exclude=set())] == ["a", "c", "d", "f"]
    assert [d.example_id for d in pick_demos(POOL, 4, exclude={"c", "f"})] == ["a", "d", "b", "e"]
    assert [d.example_id for d in pick_demos(POOL, 9, exclude=set())] == list("acdfbe")
    assert pick_demos(POOL, 4, exclude={d.example_id or "" for d in POOL}) == ()


def test_labeled_demos_are_added_to_a_stage_without_demos() -> None:
    bare = Candidate(components={"solve": "Solve the problem."})
    materials = Materials(labeled={"solve": POOL}, exclude=frozenset({"a"}))
    made = apply_operator("labeled_demos", bare, program(), "solve", materials=materials)
    assert made is not None
    assert made.lineage.operation == "operator.labeled_demos"
    assert [d.example_id for d in made.demos["solve"]] == ["b", "c", "d", "f"][:LABELED_DEMO_COUNT]
    assert made.components == bare.components
    # nothing to add: no pool for the stage, every pooled example excluded, demos present
    assert apply_operator("labeled_demos", bare, program(), "solve") is None
    everything = Materials(labeled={"solve": POOL}, exclude=frozenset("abcdef"))
    assert apply_operator("labeled_demos", bare, program(), "solve", materials=everything) is None
    assert apply_operator("labeled_demos", SEED, program(), "solve", materials=materials) is None


def test_a_cost_puts_the_cost_cutting_operators_first_and_keeps_the_rest_in_order() -> None:
    assert operator_order(cost_first=False) == tuple(OPERATORS)
    cost_first = operator_order(cost_first=True)
    assert cost_first[:2] == ("fewer_demos", "shorten")
    assert sorted(cost_first) == sorted(OPERATORS)
    rest = [name for name in OPERATORS if name not in ("fewer_demos", "shorten")]
    assert list(cost_first[2:]) == rest

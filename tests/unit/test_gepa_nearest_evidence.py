"""A child that shows the nearest few of a train-drawn demo pool can be judged on more
train examples: its retrieval never shows an input its own demo, so the pool's examples
are fair evidence (a child showing all its demos is still never judged on one of them)."""

from __future__ import annotations

import random

from test_gepa_support import word_problem_context, word_problems

from emery.algorithms.gepa import Gepa, GepaSettings, GepaState
from emery.algorithms.gepa.mutation import Basis, Mutation, draw_extension
from emery.algorithms.operators import Materials, apply_operator
from emery.algorithms.sources import staged_prompts
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.eval_result import EvalResult


async def _mutation(operator: str) -> tuple[object, GepaState, Mutation]:
    ctx = word_problem_context(word_problems(n_train=12, n_val=4), budget=BudgetConfig())
    state = await Gepa(GepaSettings()).start(ctx)
    program = staged_prompts(ctx)
    assert program is not None
    assert state.labeled
    parent = state.pool[0]
    batch = list(ctx.train[:3])
    exclude = frozenset(example.id for example in batch)
    stage = next(iter(state.labeled))
    child = apply_operator(
        operator,
        parent.candidate,
        program,
        stage,
        materials=Materials(state.labeled, exclude),
    )
    assert child is not None
    before = EvalResult(candidate_id=parent.id, split="train", results=[])
    basis = Basis(parent, [stage], batch, before, number=1)
    return ctx, state, Mutation.operated(basis, child)


async def test_a_nearest_demos_child_is_judged_on_its_pools_examples() -> None:
    ctx, state, mutation = await _mutation("nearest_demos")
    shown = {demo.example_id for demos in mutation.child.demos.values() for demo in demos}
    assert len(shown) == 9  # every train example but the minibatch is in its pool

    extra = draw_extension(ctx, state, mutation, random.Random(0), size=3)  # type: ignore[arg-type]

    assert extra  # before: none, every train example being one of its demos
    assert {e.id for e in extra} <= shown
    assert not {e.id for e in extra} & {e.id for e in mutation.batch}


async def test_a_child_showing_all_its_demos_is_never_judged_on_them() -> None:
    ctx, state, mutation = await _mutation("labeled_demos")
    shown = {demo.example_id for demos in mutation.child.demos.values() for demo in demos}
    assert shown

    for seed in range(5):
        extra = draw_extension(ctx, state, mutation, random.Random(seed), size=3)  # type: ignore[arg-type]
        assert not {e.id for e in extra} & shown

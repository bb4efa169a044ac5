"""GEPA's tie rule and labeled-demo pool: a child that ties its parent on the minibatch is
judged again on the next one; the labeled_demos operator never shows a judged example."""

from __future__ import annotations

import random

from test_gepa_support import word_problem_context, word_problems

from emery.algorithms.base import SearchContext
from emery.algorithms.gepa import Gepa, GepaSettings, GepaState
from emery.algorithms.gepa.mutation import Basis, Mutation, extend_batch, operate
from emery.algorithms.labeled import POOL_SIZE
from emery.core.models import Demo
from emery.evaluation.budget import BudgetConfig


async def started() -> tuple[GepaState, SearchContext]:
    ctx = word_problem_context(word_problems(), budget=BudgetConfig(metric_calls=200))
    return await Gepa(GepaSettings()).start(ctx), ctx


async def tied_mutation(ctx: SearchContext, state: GepaState, demo_ids: list[str]) -> Mutation:
    """A child of the seed judged on the first three train examples, showing ``demo_ids``."""
    parent = state.pool[0]
    batch = ctx.train[:3]
    before = await ctx.evaluate(parent.candidate, batch, "train")
    by_id = {e.id: e for e in ctx.train}
    demos = tuple(
        Demo(inputs=by_id[i].input, output="Answer: 1", source="labeled", example_id=i)
        for i in demo_ids
    )
    child = parent.candidate.derive(
        components={"solve": parent.candidate.components["solve"] + " Be careful."},
        demos={"solve": demos} if demos else {},
        lineage=parent.candidate.lineage,
    )
    return Mutation(Basis(parent, ["solve"], batch, before, 1), child, "reflection", ["solve"])


async def test_a_tie_is_judged_again_on_new_examples_never_shown_as_demos() -> None:
    state, ctx = await started()
    shown = [e.id for e in ctx.train[3:6]]
    mutation = await tied_mutation(ctx, state, shown)
    after = await ctx.evaluate(mutation.child, mutation.batch, "train")
    paid = ctx.budget.usage.metric_calls

    extended, joined = await extend_batch(ctx, state, mutation, after, random.Random(0))

    first = [e.id for e in mutation.batch]
    ids = [e.id for e in extended.batch]
    assert ids[:3] == first
    extra = ids[3:]
    assert extra
    assert not set(extra) & (set(first) | set(shown))
    assert [r.example_id for r in extended.before.results] == ids
    assert [r.example_id for r in joined.results] == ids
    assert ctx.budget.usage.metric_calls - paid <= 2 * len(extra)


async def test_no_extension_when_the_budget_cannot_pay_for_both() -> None:
    state, ctx = await started()
    mutation = await tied_mutation(ctx, state, [])
    after = await ctx.evaluate(mutation.child, mutation.batch, "train")
    ctx.budget.config = ctx.budget.config.model_copy(
        update={"metric_calls": ctx.budget.usage.metric_calls + 1}
    )
    same, result = await extend_batch(ctx, state, mutation, after, random.Random(0))
    assert same is mutation
    assert result is after


async def test_gepa_keeps_a_labeled_pool_and_its_operator_skips_the_minibatch() -> None:
    state, ctx = await started()
    pool = state.labeled["solve"]
    assert 0 < len(pool) <= POOL_SIZE
    assert {d.example_id for d in pool} <= {e.id for e in ctx.train}
    assert all(d.output.startswith("Answer: ") for d in pool)
    mutation = await tied_mutation(ctx, state, [])
    state.operators_tried[mutation.parent.id] = []
    offered = []
    while (made := operate(ctx, state, mutation.basis)) is not None:
        offered.append(made)
    demo_child = next(m.child for m in offered if m.source == "operator.labeled_demos")
    batch = {e.id for e in mutation.batch}
    assert demo_child.demos["solve"]
    assert not {d.example_id for d in demo_child.demos["solve"]} & batch

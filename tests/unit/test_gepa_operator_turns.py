"""Each edit operator makes one child of a parent, whatever minibatch its turn comes with:
a demo operator's child differs with the minibatch it must not show, and before, the
nearest-demos operator took every later operator turn of the parent with a near copy of
its first child, so the operators after it (labeled demos, placement, ...) never ran."""

from __future__ import annotations

from test_gepa_support import word_problem_context, word_problems

from emery.algorithms.gepa import Gepa, GepaSettings
from emery.algorithms.gepa.mutation import Basis, operate
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.eval_result import EvalResult


async def test_each_operator_makes_one_child_of_a_parent_across_minibatches() -> None:
    ctx = word_problem_context(word_problems(n_train=12, n_val=4), budget=BudgetConfig())
    state = await Gepa(GepaSettings()).start(ctx)
    parent = state.pool[0]
    stage = next(iter(state.labeled))
    before = EvalResult(candidate_id=parent.id, split="train", results=[])
    made = []
    for turn in range(8):
        batch = list(ctx.train[(3 * turn) % 12 : (3 * turn) % 12 + 3])
        mutation = operate(ctx, state, Basis(parent, [stage], batch, before, number=turn))
        if mutation is None:
            break
        made.append(mutation.source)

    assert "operator.nearest_demos" in made
    assert "operator.labeled_demos" in made
    assert len(made) == len(set(made)), made


async def test_a_job_that_names_a_cost_is_offered_the_cost_cutting_operators_first() -> None:
    first_source: dict[tuple[str, ...], str] = {}
    for objectives in (("score",), ("score", "tokens")):
        ctx = word_problem_context(word_problems(n_train=12, n_val=4), budget=BudgetConfig())
        ctx.seed_candidate = ctx.seed_candidate.derive(
            components={"solve": "Read the question. Find the numbers. Answer with Answer: N."},
            lineage=ctx.seed_candidate.lineage,
        )
        ctx.objectives = objectives
        state = await Gepa(GepaSettings()).start(ctx)
        parent = state.pool[0]
        before = EvalResult(candidate_id=parent.id, split="train", results=[])
        batch = list(ctx.train[:3])
        first = operate(ctx, state, Basis(parent, ["solve"], batch, before, number=0))
        assert first is not None
        first_source[objectives] = first.source

    assert first_source[("score", "tokens")] == "operator.shorten"  # no demos to drop
    assert first_source[("score",)] != "operator.shorten"  # the usual order: shorten is last

"""GEPA's, graph_gepa's and APO's plans (``gepa.plan``, ``apo.plan``): their figures for a
given budget, the event each run records first, and the line the CLI prints for it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
import test_apo_support as apo_support
from events_support import payloads
from test_gepa_support import _FENCED as FENCED
from test_gepa_support import run_gepa, word_problem_context, word_problems

from emery.algorithms.apo import Apo
from emery.algorithms.apo.events import ApoPlanned, ApoRoundCut
from emery.algorithms.apo.plan import ApoPlanInputs, make_apo_plan
from emery.algorithms.apo.settings import ApoSettings
from emery.algorithms.base import SearchContext
from emery.algorithms.gepa import Gepa
from emery.algorithms.gepa.events import GepaPlanned
from emery.algorithms.gepa.plan import (
    GepaPlanInputs,
    describe_gepa_plan,
    evidence_examples,
    make_gepa_plan,
)
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.separation import examples_for
from emery.core.events import Event
from emery.core.models import ChatMessage
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM
from emery.reports.event_text import describe_event, event_line
from emery.server.views import plan_view
from emery.store import MemoryStore
from emery.store.records import NewJob


def gepa_inputs(**overrides: object) -> GepaPlanInputs:
    base: dict[str, object] = {
        "algorithm": "gepa",
        "n_train": 12,
        "n_val": 10,
        "components": 2,
        "budget_metric_calls": 100,
        "operators": True,
    }
    return GepaPlanInputs(**{**base, **overrides})  # type: ignore[arg-type]


def test_gepa_plans_the_iterations_the_budget_pays_for() -> None:
    settings = GepaSettings(
        acceptance="evidence", minibatch_size=3, operator_every=3, operator_turns="schedule"
    )
    plan = make_gepa_plan(settings, gepa_inputs())

    assert plan.iteration_cost == 6  # parent and child on a minibatch of 3
    assert plan.acceptance_cost == 10  # an accepted child on all of val
    # a step starts only while 3 + 10 calls are left: 90 -> 84 -> ... -> 18 -> 12
    assert plan.iterations == (90 - 13) // 6 + 1 == 13
    assert plan.unspent == 90 - 13 * 6 == 12
    assert (plan.reflection_iterations, plan.operator_iterations) == (9, 4)
    assert plan.reflection_calls == 9 * 3  # proposal_attempts per reflection
    assert plan.metric_calls == {"baseline": 10, "iterations": 78, "total": 88}
    assert plan.merges == 5
    assert plan.summary.startswith("gepa plan: seed on 10 val, then up to 13 iterations")
    assert "9 reflection (up to 27 calls), 4 edit-operator (every 3)" in plan.summary
    assert any("the last 12 metric calls stay unspent" in note for note in plan.notes)
    assert any("the cost of about 2 iterations" in note for note in plan.notes)
    # an undecided child is judged on up to all 12 train examples (the target needs 55)
    assert (plan.evidence_examples, plan.evidence_cost) == (12, 24)
    assert plan.separation is not None
    assert plan.separation.candidates == (100 - 10) // (24 + 10) == 2
    assert "separates about 2 children judged on 12 examples each: +/-33 points" in plan.summary


@pytest.mark.parametrize("budget", [100, 200, 400])
def test_gepa_judges_children_on_what_the_separation_needs(budget: int) -> None:
    """60 train, 40 val: a child is judged on up to 55 train examples (was 8 minibatches of
    3, 24: a 35-point difference), and the plan says how many such children the budget
    pays for."""
    inputs = gepa_inputs(n_train=60, n_val=40, budget_metric_calls=budget)

    plan = make_gepa_plan(GepaSettings(acceptance="evidence"), inputs)

    assert plan.evidence_examples == examples_for(0.2) == 55
    assert plan.separation is not None
    assert plan.separation.candidates == {100: 0, 200: 1, 400: 2}[budget]
    assert plan.separation.detectable <= 0.2
    assert plan.iterations == (budget - 40 - 43) // 6 + 1  # while 3 + 40 calls are left
    if budget == 100:
        assert any("cannot judge one child" in note for note in plan.notes)


@pytest.mark.parametrize("budget", [100, 200, 400])
def test_two_stage_plans_children_judged_on_val_not_on_more_train(budget: int) -> None:
    """The default rule decides a child on its minibatch alone and judges it on val: the
    plan names no evidence examples, and counts the children the budget scores on all of
    val (minibatch of 3 for both, then 40 val) and what 40 val examples separate."""
    inputs = gepa_inputs(n_train=60, n_val=40, budget_metric_calls=budget)

    plan = make_gepa_plan(GepaSettings(), inputs)

    assert (plan.evidence_examples, plan.evidence_cost) == (3, 6)
    assert "undecided child" not in plan.summary
    assert plan.separation is not None
    assert plan.separation.examples == 40
    children = {100: 1, 200: 3, 400: 7}[budget]
    assert plan.separation.candidates == (budget - 40) // (6 + 40) == children
    assert f"separates about {plan.separation.candidates} child" in plan.summary
    assert plan.iterations == (budget - 40 - 43) // 6 + 1  # the same tail stop as evidence's
    assert not any("evidence examples" in note for note in plan.notes)


def test_two_stage_plan_says_when_no_child_can_reach_val() -> None:
    """45 calls after the seed's 40 val pay one iteration (the tail stop needs 43) but not
    its child's 6 and all 40 of val."""
    plan = make_gepa_plan(GepaSettings(), gepa_inputs(n_train=60, n_val=40, budget_metric_calls=85))

    assert plan.iterations == 1
    assert plan.separation is not None
    assert plan.separation.candidates == 0
    assert any("cannot score one child on its minibatch and on all of val" in n for n in plan.notes)


def test_gepa_plan_under_thompson_turns_gives_the_operators_at_most_the_offered_turns() -> None:
    plan = make_gepa_plan(GepaSettings(minibatch_size=3), gepa_inputs())

    assert plan.operator_turns == "thompson"
    # every third of the 13 iterations is offered; a turn not kept reflects
    assert (plan.reflection_iterations, plan.operator_iterations) == (9, 4)
    assert plan.reflection_calls == 13 * 3
    assert (
        "at least 9 reflection (up to 39 calls), up to 4 edit-operator (every 3, thompson:"
        " those their record earns)" in plan.summary
    )
    never = make_gepa_plan(GepaSettings(operator_every=0), gepa_inputs())
    assert "at least" not in never.summary
    assert never.reflection_calls == 13 * 3
    own = make_gepa_plan(GepaSettings(operator_turns="mine:TURNS"), gepa_inputs())
    assert (own.reflection_iterations, own.operator_iterations) == (None, None)
    assert "reflection or edit-operator as mine:TURNS says (up to 39" in own.summary


def test_an_explicit_evidence_cap_is_the_plans_and_the_runs() -> None:
    settings = GepaSettings(acceptance="evidence", max_evidence_examples=9)
    plan = make_gepa_plan(settings, gepa_inputs())

    assert (plan.evidence_examples, plan.evidence_cost) == (9, 18)
    assert evidence_examples(settings, 12) == Gepa(settings)._evidence_cap(
        word_problem_context(word_problems(n_train=12))
    )


def test_a_gepa_plan_stored_before_separation_still_loads_and_reads() -> None:
    plan = make_gepa_plan(GepaSettings(), gepa_inputs())
    old = plan.model_dump(mode="json")
    for key in ("evidence_examples", "evidence_cost", "separation"):
        old.pop(key)

    stored = GepaPlanned.model_validate(old)

    assert stored.separation is None
    assert stored.evidence_examples is None
    assert "separates" not in describe_gepa_plan(stored)
    assert "while an undecided child" not in describe_gepa_plan(stored)


def test_gepa_plan_without_a_budget_or_operators_or_with_max_iterations() -> None:
    open_ended = make_gepa_plan(GepaSettings(), gepa_inputs(budget_metric_calls=None))
    assert open_ended.iterations is None
    assert open_ended.metric_calls == {"baseline": 10}
    assert "iterations until another limit ends the run" in open_ended.summary

    capped = make_gepa_plan(GepaSettings(max_iterations=4), gepa_inputs(operators=False))
    assert capped.iterations == 4
    assert capped.operator_every == 0
    assert capped.operator_iterations == 0
    assert capped.reflection_iterations == 4
    assert any("need a prompt program" in note for note in capped.notes)
    # the calls max_iterations leaves are its doing, not the tail stop's
    assert capped.unspent == 90 - 4 * capped.iteration_cost
    unspent = [note for note in capped.notes if "stay unspent" in note]
    assert unspent == [
        f"the last {capped.unspent} metric calls stay unspent: max_iterations (4) ends the"
        " run first"
    ]

    broke = make_gepa_plan(GepaSettings(), gepa_inputs(budget_metric_calls=12))
    assert broke.iterations == 0
    assert any("not one iteration" in note for note in broke.notes)


def test_graph_gepa_plan_counts_structural_iterations_first() -> None:
    inputs = gepa_inputs(algorithm="graph_gepa", structure_every=2)
    plan = make_gepa_plan(GepaSettings(minibatch_size=3, operator_every=3), inputs)

    assert plan.iterations == 13
    # 2, 4, ..., 12 are structural; 3 and 9 are operators (6 and 12 went to structure)
    assert (plan.structure_iterations, plan.operator_iterations) == (6, 2)
    assert plan.reflection_iterations == 5
    assert plan.summary.startswith("graph_gepa plan:")
    assert "6 structural" in plan.summary


async def test_a_gepa_run_records_its_plan_first_and_runs_the_planned_iterations() -> None:
    data = word_problems()
    ctx = word_problem_context(data, budget=BudgetConfig(metric_calls=400))
    settings = {"max_iterations": 4, "use_merge": False, "stop_when_perfect": False}

    outcome, records = await run_gepa(ctx, settings)

    kinds = [event.kind for record in records for event in record.events]
    assert kinds[:2] == ["budget_planned", "gepa.plan"]  # the limits, then the plan
    [plan] = payloads(records, GepaPlanned)
    assert plan.val_size == len(data.val)
    assert plan.train_size == len(data.train)
    assert plan.budget_metric_calls == 400
    assert plan.iterations == 4
    assert outcome.state.iteration == 4


def poisoned_children_context(budget: int) -> SearchContext:
    """60 train, 10 val; the task model answers right unless its instruction holds POISON,
    and every reflection adds a new POISON line: each child is worse than the seed on its
    first minibatch, so it is rejected there and never scored on val (the plan's case)."""
    data = word_problems(n_train=60, n_val=10)
    gold = {e.input["question"]: int(e.expected) for e in data}

    def answer(messages: Sequence[ChatMessage]) -> str:
        instruction = next((m["content"] for m in messages if m["role"] == "system"), "")
        right = gold[messages[-1]["content"]]
        return f"Answer: {right + 1 if 'POISON' in instruction else right}"

    edits = iter(range(10_000))

    def poison(messages: Sequence[ChatMessage]) -> str:
        current = FENCED.findall(messages[0]["content"])[0].strip()
        return f"```\n{current} POISON {next(edits)}\n```"

    return word_problem_context(
        data,
        budget=BudgetConfig(metric_calls=budget),
        task=FakeLM(answer, model="fake/task"),
        reflection=FakeLM(poison, model="fake/reflection"),
    )


@pytest.mark.parametrize(("budget", "k"), [(70, 1), (76, 1), (76, 4), (100, 1), (100, 4)])
async def test_the_gepa_plan_counts_the_iterations_a_run_makes_before_the_tail_stop(
    budget: int, k: int
) -> None:
    """A step starts only while the calls left pay for a child's minibatch and all of val
    (3 + 10): the plan counts the iterations that fit before that and the calls left
    unspent. Before, it counted (budget - 10) // 6 iterations (10, 11 and 15 here) and no
    unspent calls, where one child a step makes 8, 9 and 13 and leaves 12 calls, and four
    a step make 11 and 15 and leave none."""
    ctx = poisoned_children_context(budget)
    settings = {
        "proposals_per_step": k,
        "operator_every": 0,
        "use_merge": False,
        "stop_when_perfect": False,
        "skip_perfect": False,
    }

    outcome, records = await run_gepa(ctx, settings)

    [plan] = payloads(records, GepaPlanned)
    assert outcome.reason.startswith("metric_calls: the ")
    assert outcome.state.counters.rejected == outcome.state.iteration  # the plan's case
    assert plan.iterations == outcome.state.iteration
    assert plan.unspent == budget - ctx.budget.usage.metric_calls
    assert plan.metric_calls["total"] == ctx.budget.usage.metric_calls


async def test_an_apo_run_records_its_plan_and_is_cut_in_the_round_it_cannot_pay_for() -> None:
    settings = apo_support.settings()  # beam 2, branch 2, 2 rounds, train batches of 3
    data = apo_support.dataset()  # 8 train, 6 val
    edits = iter(range(1000))
    reflection = apo_support.reflection_lm(
        lambda _: apo_support.fenced(f"Variant {next(edits)}: reply with the number.")
    )
    ctx = apo_support.context(reflection, data=data, budget=BudgetConfig(metric_calls=60))

    _, records = await apo_support.run(ctx, Apo(settings))

    assert [e.kind for e in records[0].events[:2]] == ["budget_planned", "apo.plan"]
    [plan] = payloads(records, ApoPlanned)
    assert plan.expansions == 2 * 2 * 2
    assert plan.lm_calls["total"] == 16
    # baseline 6; a round: 4 expansions x 3 train, (beam + 4 children) x 6 val, no rest of val
    assert plan.metric_calls == {
        "baseline": 6,
        "train_batches": 24,
        "val_batches": (1 + 4) * 6 + (2 + 4) * 6,
        "full_val": 0,
        "total": 96,
    }
    assert plan.rounds_affordable == 1
    assert any("pays for 1 of the 2 rounds" in note for note in plan.notes)
    cuts = payloads(records, ApoRoundCut)
    assert [cut.round for cut in cuts] == [1]  # the second round, as planned


def test_apo_plan_without_a_budget_counts_operator_children_per_distinct_parent() -> None:
    settings = apo_support.settings(operator_children=2, rounds=3)
    inputs = ApoPlanInputs(n_train=8, n_val=20, budget_metric_calls=None, operators=True)

    plan = make_apo_plan(settings, inputs)

    assert plan.rounds_affordable is None
    # round 1: one distinct parent (the seed); rounds 2 and 3: a full beam of 2
    assert plan.children == 4 + 2 + (4 + 4) * 2
    assert plan.metric_calls["full_val"] == 3 * (20 - 16)
    assert "budget no limit" in plan.summary


def test_the_cli_prints_a_plan_as_its_summary_and_notes() -> None:
    plan = make_gepa_plan(GepaSettings(use_merge=False), gepa_inputs())
    item = Event.of(plan).model_copy(update={"seq": 1, "at": datetime.now(UTC)})

    text = describe_event(item)

    assert text.startswith(plan.summary + " (each accepted child is scored on all 10 val")
    assert text.endswith("stops early once the best candidate is perfect on val)")
    assert "\n" not in text
    assert f"#1    {plan.summary}" in event_line(item)


def test_the_dashboard_shows_a_gepa_plan() -> None:
    store = MemoryStore()
    store.create_job(NewJob(id="j-gepa0001", name="planned", algorithm="gepa", config={}))
    plan = make_gepa_plan(GepaSettings(), gepa_inputs())
    store.append_events("j-gepa0001", [Event.of(plan)])

    view = plan_view(store, "j-gepa0001")

    assert view is not None
    assert view["kind"] == "gepa.plan"
    assert view["summary"] == plan.summary
    assert view["figures"]["iterations"] == 13
    assert view["figures"]["metric_calls.total"] == 88


@pytest.mark.parametrize(("budget", "children"), [(100, 1), (200, 3), (400, 8)])
def test_apo_ranks_on_what_the_separation_needs_and_says_how_many_children(
    budget: int, children: int
) -> None:
    inputs = ApoPlanInputs(n_train=60, n_val=40, budget_metric_calls=budget, operators=False)

    plan = make_apo_plan(ApoSettings(), inputs)

    assert plan.val_batch_size == 40  # all of val: fewer than the 55 the target needs
    assert plan.separation is not None
    # after the seed's 40: each child costs its critique's 4 train and the 40 val
    assert plan.separation.candidates == (budget - 40) // 44 == children
    assert f"separates about {children} child" in plan.summary
    big = make_apo_plan(ApoSettings(), ApoPlanInputs(60, 200, None, operators=False))
    assert big.val_batch_size == examples_for(0.2) == 55

"""GEPA's plan (event ``gepa.plan``): what a run will do given its metric-call budget.

An iteration scores the parent and its child on one train minibatch (2 x the minibatch
size in metric calls). A child the paired evidence cannot yet decide on and that is ahead
(or tied, once) is scored with its parent on more minibatches, up to the evidence examples
(``evidence_examples``: 2 x that in calls); an accepted child is scored on all of val
besides. A step starts only while the calls left can pay for a new candidate to join the
pool (a child's minibatch and all of val: the tail stop, ``Gepa._calls_to_join``), so the
budget left after the seed's val score pays for at most the iterations that fit before
fewer than ``minibatch + val`` calls are left (every child decided on its first minibatch
and none accepted; ``affordable_iterations``), and the calls left then stay unspent
(``unspent``). It pays for about ``(budget - val) // (2 x evidence + val)`` children
judged on all the evidence examples and accepted: the children the budget can separate
(``algorithms.separation``). Train rollouts already scored are free, so the real counts
can differ a little either way. An iteration is one child: with ``proposals_per_step`` k,
a step runs k iterations at once (fewer when the metric calls left pay for fewer), so a
step that starts just above the tail can spend calls a single child would have left, and
k changes the count a little.

The evidence examples default to what a 20-point difference needs for a typical pair
(``algorithms.separation``, 55) rather than a fixed number of minibatches: the minibatch
of 3 is what the reflection reads, not what a verdict can rest on.

That is the ``evidence`` rule. Under a rule whose minibatch alone decides (no
``further_evidence``: ``two_stage``, the default) no child is judged on more train
examples; a child ahead on its minibatch is judged on val, so the plan counts the
children the budget can score on all of val (``(budget - val) // (iteration + val)``)
and what val separates.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.gepa.acceptance import acceptance_rule
from emery.algorithms.gepa.events import GepaPlanned
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.separation import TYPICAL, examples_for, separation
from emery.algorithms.sources import staged_prompts
from emery.algorithms.warm_start import warm_note

log = logging.getLogger(__name__)

BUILT_IN_TURNS = ("schedule", "thompson")
"""The turn policies whose turns the plan counts (a plug-in's are not known)."""


@dataclass(frozen=True)
class GepaPlanInputs:
    """What the plan depends on besides the settings."""

    algorithm: str
    n_train: int
    n_val: int
    components: int
    budget_metric_calls: int | None
    operators: bool
    """The system is a prompt program (LM-free edit operators apply)."""
    structure_every: int | None = None
    """``graph_gepa``'s cadence of structural children; None for GEPA."""


@dataclass(frozen=True)
class _Split:
    reflection: int
    operator: int
    structure: int


def _split(iterations: int, operator_every: int, structure_every: int | None) -> _Split:
    """Iterations by what proposes their child: a structural mutation comes first, then an
    edit operator, else the reflection."""
    s, o = structure_every or 0, operator_every
    structure = iterations // s if s else 0
    operator = iterations // o if o else 0
    if s and o:
        operator -= iterations // math.lcm(o, s)
    return _Split(iterations - structure - operator, operator, structure)


def evidence_examples(settings: GepaSettings, n_train: int) -> int:
    """The most train examples a child is judged on against its parent while the evidence
    is undecided: ``max_evidence_examples``, by default what the separation target needs;
    at least one minibatch, at most the train set."""
    wanted = settings.max_evidence_examples or examples_for(TYPICAL.target)
    return max(1, min(n_train, max(wanted, settings.minibatch_size)))


def affordable_iterations(left: int, cost: int, to_join: int, per_step: int) -> tuple[int, int]:
    """The iterations ``left`` metric calls pay for, each costing ``cost``, ``per_step`` of
    them a step (fewer when the calls left pay for fewer, never none), a step starting only
    while at least ``to_join`` calls are left (the tail stop); and the calls left unspent."""
    cost, per_step = max(cost, 1), max(per_step, 1)
    step = per_step * cost
    full_from = max(to_join, step)  # a step of all per_step children starts from here
    iterations = 0
    if left >= full_from:
        steps = (left - full_from) // step + 1
        iterations, left = steps * per_step, left - steps * step
    while left >= max(to_join, 1):  # below full_from: at most a few short steps
        children = min(per_step, max(1, left // cost))
        iterations, left = iterations + children, max(0, left - children * cost)
    return iterations, left


def make_gepa_plan(settings: GepaSettings, inputs: GepaPlanInputs) -> GepaPlanned:
    """The plan of a run with ``settings`` on data and a budget like ``inputs``."""
    n_val, budget = inputs.n_val, inputs.budget_metric_calls
    minibatch = min(settings.minibatch_size, inputs.n_train)
    cost = (2 if settings.failure_share is None else 3) * minibatch
    further = acceptance_rule(settings).further_evidence
    if further:  # judged on train while undecided, up to the evidence examples
        evidence = evidence_examples(settings, inputs.n_train)
        judged_on, per_judged = evidence, 2 * evidence + n_val
    else:  # the minibatch alone decides; the verdicts that remain are on val
        evidence, judged_on, per_judged = minibatch, n_val, cost + n_val
    judged = None if budget is None else max(0, budget - n_val) // per_judged
    iterations, unspent = None, None
    if budget is not None:
        iterations, unspent = affordable_iterations(
            max(0, budget - n_val), cost, minibatch + n_val, settings.proposals_per_step
        )
    if settings.max_iterations is not None and (
        iterations is None or settings.max_iterations < iterations
    ):
        iterations = settings.max_iterations
        if budget is not None:
            unspent = max(0, budget - n_val - iterations * cost)
    operator_every = settings.operator_every if inputs.operators else 0
    split = (
        None if iterations is None else _split(iterations, operator_every, inputs.structure_every)
    )
    own_turns = inputs.operators and settings.operator_turns not in BUILT_IN_TURNS
    metric_calls = {"baseline": n_val}
    if iterations is not None:
        metric_calls |= {"iterations": iterations * cost, "total": n_val + iterations * cost}
    built_in_merges = settings.use_merge and settings.merge_policy == "after_acceptance"
    merges = settings.max_merges if built_in_merges else 0  # a plug-in's are not known
    plan = GepaPlanned(
        summary="",
        metric_calls=metric_calls,
        budget_metric_calls=budget,
        notes=_notes(settings, inputs, cost, iterations, judged, unspent, further),
        algorithm=inputs.algorithm,
        val_size=n_val,
        train_size=inputs.n_train,
        minibatch_size=minibatch,
        components=inputs.components,
        component_selection=settings.component_selection,
        iteration_cost=cost,
        acceptance_cost=n_val,
        iterations=iterations,
        unspent=unspent,
        max_iterations=settings.max_iterations,
        reflection_iterations=None if split is None or own_turns else split.reflection,
        operator_iterations=None if split is None or own_turns else split.operator,
        structure_iterations=None if split is None else split.structure,
        operator_every=operator_every,
        operator_turns=settings.operator_turns,
        structure_every=inputs.structure_every,
        reflection_calls=_reflection_calls(settings, split),
        merges=merges,
        merge_cost=min(settings.merge_subsample, n_val) if merges else 0,
        evidence_examples=evidence,
        evidence_cost=2 * evidence,
        separation=separation(judged_on, judged) if judged_on else None,
    )
    plan.summary = describe_gepa_plan(plan)
    return plan


def _reflection_calls(settings: GepaSettings, split: _Split | None) -> int | None:
    """The most reflection calls: each reflecting iteration's attempts, counting the turns
    offered to the operators as reflections unless the schedule takes them all."""
    if split is None:
        return None
    taken = settings.operator_turns == "schedule"
    return (split.reflection + (0 if taken else split.operator)) * settings.proposal_attempts


def _notes(
    settings: GepaSettings,
    inputs: GepaPlanInputs,
    cost: int,
    iterations: int | None,
    judged: int | None,
    unspent: int | None,
    further: bool,
) -> list[str]:
    notes = []
    if judged == 0 and iterations:
        notes.append(
            "the budget cannot judge one child on all the evidence examples and score it on"
            " val: only a child shown better on fewer examples (a large difference) is kept"
            if further
            else "the budget cannot score one child on its minibatch and on all of val: no"
            " child can join the pool"
        )
    if iterations is not None and inputs.n_val:
        notes.append(
            f"each accepted child is scored on all {inputs.n_val} val examples, the cost of"
            f" about {math.ceil(inputs.n_val / max(cost, 1))} iterations: the more children"
            " are accepted, the fewer iterations run"
        )
    if iterations == 0:
        notes.append(f"the budget pays for the seed's val score but not one iteration ({cost})")
    if unspent and iterations == settings.max_iterations:
        notes.append(
            f"the last {unspent} metric calls stay unspent: max_iterations ({iterations})"
            " ends the run first"
        )
    elif unspent:
        notes.append(
            f"the last {unspent} metric calls stay unspent: a step starts only while the"
            f" calls left pay for a child's minibatch and all of val"
            f" ({min(settings.minibatch_size, inputs.n_train) + inputs.n_val}), so that its"
            " child could still join the pool"
        )
    k = settings.proposals_per_step
    if k > 1:
        steps = "" if iterations is None else f": about {math.ceil(iterations / k)} steps"
        notes.append(
            f"{k} children a step, proposed and scored at once{steps}; a step proposes only"
            f" as many as the metric calls left pay for ({cost} each) and is kept or"
            " repeated whole"
        )
    if settings.operator_every and not inputs.operators:
        notes.append("edit operators need a prompt program: every iteration reflects")
    subsample = min(settings.merge_subsample, inputs.n_val)
    if settings.use_merge and settings.merge_policy != "after_acceptance":
        notes.append(
            f"merges when merge_policy {settings.merge_policy!r} says (not counted in this"
            f" plan), each scored first on {subsample} val examples"
        )
    elif settings.use_merge and settings.max_merges:
        notes.append(
            f"up to {settings.max_merges} merges after acceptances, each scored first on"
            f" {subsample} val examples"
        )
    if settings.stop_when_perfect:
        notes.append("stops early once the best candidate is perfect on val")
    return notes


def describe_gepa_plan(plan: GepaPlanned) -> str:
    """One line for the log and the CLI."""
    budget = "no limit" if plan.budget_metric_calls is None else str(plan.budget_metric_calls)
    head = (
        f"{plan.algorithm} plan: seed on {plan.val_size} val, then "
        + (
            "iterations until another limit ends the run"
            if plan.iterations is None
            else f"up to {plan.iterations} iterations"
        )
        + f" on train minibatches of {plan.minibatch_size} ({plan.iteration_cost} metric calls"
        f" each{_evidence_text(plan)}, {plan.acceptance_cost} more per accepted child)"
    )
    if plan.iterations is not None and plan.reflection_iterations is None:
        head += (
            f": reflection or edit-operator as {plan.operator_turns} says (up to"
            f" {plan.reflection_calls} reflection calls)"
        )
    elif plan.iterations is not None:
        exact = plan.operator_turns == "schedule" or not plan.operator_every
        least, most = ("", "") if exact else ("at least ", "up to ")
        kinds = [
            f"{least}{plan.reflection_iterations} reflection (up to {plan.reflection_calls} calls)"
        ]
        if plan.operator_every:
            taken = "" if exact else f", {plan.operator_turns}: those their record earns"
            kinds.append(
                f"{most}{plan.operator_iterations} edit-operator (every"
                f" {plan.operator_every}{taken})"
            )
        if plan.structure_every is not None:
            kinds.append(f"{plan.structure_iterations} structural")
        head += ": " + ", ".join(kinds)
    selection = "round robin" if plan.component_selection == "round_robin" else "all"
    separates = (
        ""
        if plan.separation is None
        else f"; separates {plan.separation.describe('children', 'child')}"
    )
    return (
        f"{head}; {selection} over {plan.components} component{'s' * (plan.components != 1)};"
        f" up to {plan.merges} merges;"
        f" budget {budget} metric calls{separates}"
    )


def _evidence_text(plan: GepaPlanned) -> str:
    if plan.evidence_examples is None or plan.evidence_examples <= plan.minibatch_size:
        return ""
    return (
        f", up to {plan.evidence_cost} while an undecided child is ahead, judged on up to"
        f" {plan.evidence_examples} train examples"
    )


def record_gepa_plan(
    ctx: SearchContext, settings: GepaSettings, inputs: GepaPlanInputs
) -> GepaPlanned:
    """Make the plan, log it and emit it (``gepa.plan``)."""
    plan = warm_note(ctx, make_gepa_plan(settings, inputs))
    log.info(plan.summary)
    ctx.emit(plan)
    return plan


def plan_inputs(
    ctx: SearchContext, algorithm: str, components: int, structure_every: int | None = None
) -> GepaPlanInputs:
    """The plan's inputs from a search context."""
    return GepaPlanInputs(
        algorithm=algorithm,
        n_train=len(ctx.train),
        n_val=len(ctx.val),
        components=components,
        budget_metric_calls=ctx.budget.remaining_metric_calls(),
        operators=staged_prompts(ctx) is not None,
        structure_every=structure_every,
    )

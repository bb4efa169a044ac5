"""APO's plan (event ``apo.plan``): what a run will do given its metric-call budget.

A round expands ``beam_width`` parent slots (the beam repeated while it is smaller)
``branch_factor`` times each: the parent is run on ``gradient_batch_size`` train examples,
then critiqued and edited (one child per expansion). On a prompt program each distinct
parent also gets ``operator_children`` LM-free children. The beam and the children are
scored on a val batch, and the batch's best on the rest of val. The figures are upper
bounds (rollouts already scored are free); a round the budget cannot finish is cut and
scores the children it has. ``proposals_per_step`` changes how many expansions and scorings
a step runs at once, not these figures.

The val batch is what ranks the children and decides whether a beam member is shown
worse, so by default it holds what a 20-point difference between two typical candidates
needs (``algorithms.separation``: 55 examples, all of val when val is smaller), and the
plan says how many children the budget can judge on it: each costs its critique's train
batch and the val batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from emery.algorithms.apo.events import ApoPlanned
from emery.algorithms.apo.settings import ApoSettings
from emery.algorithms.base import SearchContext
from emery.algorithms.separation import TYPICAL, examples_for, separation
from emery.algorithms.sources import staged_prompts
from emery.algorithms.warm_start import warm_note

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApoPlanInputs:
    """What the plan depends on besides the settings."""

    n_train: int
    n_val: int
    budget_metric_calls: int | None
    operators: bool
    """The system is a prompt program (LM-free edit operators apply)."""


@dataclass
class _Round:
    expansions: int = 0
    children: int = 0
    train: int = 0
    val_batches: int = 0
    full_val: int = 0

    @property
    def cost(self) -> int:
        return self.train + self.val_batches + self.full_val


def val_batch_size(settings: ApoSettings, n_val: int) -> int:
    """The val examples a round ranks on: ``val_batch_size``, by default what the
    separation target needs; at most all of val."""
    return min(n_val, settings.val_batch_size or examples_for(TYPICAL.target))


def _rounds(settings: ApoSettings, inputs: ApoPlanInputs) -> list[_Round]:
    """Each round's expansions, children and metric calls (no cache hits counted)."""
    val_batch = val_batch_size(settings, inputs.n_val)
    operators = settings.operator_children if inputs.operators else 0
    beam, rounds = 1, []
    for _ in range(settings.rounds):
        expansions = settings.beam_width * settings.branch_factor
        children = expansions + min(settings.beam_width, beam) * operators
        rounds.append(
            _Round(
                expansions=expansions,
                children=children,
                train=expansions * min(settings.gradient_batch_size, inputs.n_train),
                val_batches=(beam + children) * val_batch,
                full_val=inputs.n_val - val_batch,
            )
        )
        beam = min(settings.beam_width, beam + children)
    return rounds


def make_apo_plan(settings: ApoSettings, inputs: ApoPlanInputs) -> ApoPlanned:
    """The plan of a run with ``settings`` on data and a budget like ``inputs``."""
    rounds = _rounds(settings, inputs)
    baseline = inputs.n_val if settings.run_initial_validation else 0
    budget = inputs.budget_metric_calls
    affordable = None
    if budget is not None:
        left, affordable = budget - baseline, 0
        for one in rounds:
            if one.cost > left:
                break
            left, affordable = left - one.cost, affordable + 1
    metric_calls = {
        "baseline": baseline,
        "train_batches": sum(r.train for r in rounds),
        "val_batches": sum(r.val_batches for r in rounds),
        "full_val": sum(r.full_val for r in rounds),
    }
    metric_calls["total"] = sum(metric_calls.values())
    expansions = sum(r.expansions for r in rounds)
    val_batch = val_batch_size(settings, inputs.n_val)
    gradient = min(settings.gradient_batch_size, inputs.n_train)
    judged = None
    if budget is not None:
        seed = 0 if baseline else val_batch  # the seed's val batch comes with its baseline
        rest = inputs.n_val - val_batch
        judged = max(0, budget - baseline - seed - rest) // (val_batch + gradient)
    plan = ApoPlanned(
        summary="",
        metric_calls=metric_calls,
        budget_metric_calls=budget,
        notes=_notes(settings, inputs, affordable),
        rounds=settings.rounds,
        rounds_affordable=affordable,
        beam_width=settings.beam_width,
        branch_factor=settings.branch_factor,
        operator_children=settings.operator_children if inputs.operators else 0,
        gradient_batch_size=gradient,
        val_batch_size=val_batch,
        val_size=inputs.n_val,
        train_size=inputs.n_train,
        expansions=expansions,
        children=sum(r.children for r in rounds),
        lm_calls={"critique": expansions, "edit": expansions, "total": 2 * expansions},
        separation=separation(val_batch, judged),
    )
    plan.summary = describe_apo_plan(plan)
    return plan


def _notes(settings: ApoSettings, inputs: ApoPlanInputs, affordable: int | None) -> list[str]:
    notes = []
    if affordable is not None and affordable < settings.rounds:
        notes.append(
            f"the budget pays for {affordable} of the {settings.rounds} rounds in full:"
            f" round {affordable + 1} is cut when another child no longer fits"
        )
    if settings.beam_width > 1:
        notes.append(
            f"up to {settings.beam_width} candidates a round go on to full val when the"
            " val batch cannot tell them apart (the plan counts the best one)"
        )
    if settings.operator_children and not inputs.operators:
        notes.append("edit operators need a prompt program: only the LM's edits are children")
    if settings.skip_perfect_batches:
        notes.append("an expansion whose train batch is all correct proposes nothing")
    k = settings.proposals_per_step
    if k > 1:
        notes.append(
            f"{k} expansions (and {k} val-batch scorings) a step, run at once: the same"
            " calls in fewer steps; a step takes only the expansions the budget left pays for"
        )
    return notes


def describe_apo_plan(plan: ApoPlanned) -> str:
    """One line for the log and the CLI."""
    budget = "no limit" if plan.budget_metric_calls is None else str(plan.budget_metric_calls)
    operators = (
        f" (+{plan.operator_children} operator children per parent)"
        if plan.operator_children
        else ""
    )
    pays = "" if plan.rounds_affordable is None else f", pays for {plan.rounds_affordable}"
    return (
        f"apo plan: {plan.rounds} rounds of beam {plan.beam_width} x branch"
        f" {plan.branch_factor}{operators}: critiques on {plan.gradient_batch_size} train,"
        f" ranked on {plan.val_batch_size} val, the best on all {plan.val_size} val;"
        f" up to {plan.metric_calls['total']} metric calls (budget {budget}{pays}) and"
        f" {plan.lm_calls['total']} critique/edit LM calls"
        + (
            ""
            if plan.separation is None
            else f"; separates {plan.separation.describe('children', 'child')}"
        )
    )


def record_apo_plan(ctx: SearchContext, settings: ApoSettings) -> ApoPlanned:
    """Make the plan from the search context, log it and emit it (``apo.plan``)."""
    inputs = ApoPlanInputs(
        n_train=len(ctx.train),
        n_val=len(ctx.val),
        budget_metric_calls=ctx.budget.remaining_metric_calls(),
        operators=staged_prompts(ctx) is not None,
    )
    plan = warm_note(ctx, make_apo_plan(settings, inputs))
    log.info(plan.summary)
    ctx.emit(plan)
    return plan

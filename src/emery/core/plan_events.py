"""The plans GEPA, APO and baseline record at their start (``gepa.plan``, ``apo.plan``,
``baseline.plan``): what will run given the budget. They share ``PlanPayload``'s shape with
MIPRO's ``mipro.plan``. ``PaceWarning``: the wall-time budget, at the pace measured on the
seed's evaluation, cannot hold the planned trials. ``BudgetPlanned``: the job's limits,
recorded before any algorithm's plan. ``SelectPlanned``: what val separates for a winner rule
that reads a cost."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import BaseModel, Field

from emery.core.payloads import Payload, PlanPayload


class Separation(BaseModel):
    """What a plan's budget can separate (``algorithms.separation``): about ``candidates``
    judged on ``examples`` shared examples each (None: no budget counts them), where the
    paired interval of two equally good candidates is +/- ``half_width`` and a difference
    of ``detectable`` is shown better ``power`` of the time, for a typical pair (each
    scoring ``score``, their per-example scores correlating at ``correlation``). The plan
    sized its batches to detect ``target``, which needs ``target_examples`` shared examples
    (None in plans recorded before it was)."""

    candidates: int | None
    examples: int
    half_width: float
    detectable: float
    power: float
    target: float
    score: float
    correlation: float
    target_examples: int | None = None

    def describe(self, what: str = "candidates", one: str | None = None) -> str:
        """``about 3 trials judged on 40 examples each: +/-17 points, a 24-point
        difference shown 80% of the time (20 points need 55 examples each)``: the
        parenthesis when the target is finer than the examples can show."""
        count = "" if self.candidates is None else f"about {self.candidates} "
        if self.candidates == 1:
            what = one or what.removesuffix("s")
        shown = (
            f"a {_points(self.detectable)}-point difference shown"
            f" {round(100 * self.power)}% of the time"
            if self.detectable < 1
            else "no difference shown reliably"
        )
        short = (
            f" ({_points(self.target)} points need {self.target_examples} examples each)"
            if self.target_examples is not None and self.detectable > self.target
            else ""
        )
        return (
            f"{count}{what} judged on {self.examples} examples each:"
            f" +/-{_points(self.half_width)} points, {shown}{short}"
        )


def _points(share: float) -> int:
    return math.ceil(100 * share - 1e-9)


class BudgetPlanned(Payload):
    """The job's budget, recorded before the search starts (``budget_planned``): each
    limit (None: none), the roles the LM token and cost limits cover together, and the
    line the CLI prints."""

    kind: ClassVar[str] = "budget_planned"
    summary: str
    metric_calls: int | None = None
    lm_tokens: int | None = None
    lm_cost_usd: float | None = None
    wall_time_s: float | None = None
    max_proposals: int | None = None
    no_improvement_iterations: int | None = None
    stop_file: str | None = None
    roles: list[str] = Field(default_factory=list)


class SelectPlanned(Payload):
    """What the job's ``select`` rule decides on, recorded after the budget's line when the
    rule reads a cost (``select_planned``): it chooses among the candidates scored on all of
    val, so ``separation`` is what val separates (``examples``: its size); ``margin`` is
    ``cheapest_within``'s (None for other rules)."""

    kind: ClassVar[str] = "select_planned"
    select: str
    separation: Separation
    margin: float | None = None

    def message(self) -> str:
        """``select cheapest_within:0.02 decides on val, candidates judged on 30 examples
        each: +/-20 points, ...; its 2-point margin is finer: ...``."""
        text = f"select {self.select} decides on val, {self.separation.describe()}"
        if self.margin and self.margin < self.separation.half_width:
            text += (
                f"; its {_points(self.margin)}-point margin is finer: a candidate within it"
                " is one val cannot tell from the best, not one shown as good"
            )
        return text


class GepaPlanned(PlanPayload):
    """A GEPA (or ``graph_gepa``) run's plan.

    An iteration scores the parent and its child on one train minibatch
    (``iteration_cost`` metric calls); an accepted child is then scored on all of val
    (``acceptance_cost``); while the paired evidence is undecided and the child ahead, both
    are scored on more minibatches, up to ``evidence_examples`` (``evidence_cost`` metric
    calls). ``iterations`` is how many the budget pays for when every child is decided on
    its first minibatch and none is accepted, a step starting only while the calls left pay
    for a child's minibatch and all of val (capped by ``max_iterations``; None: no limit
    on either), split by what proposes the child: the reflection LM, an LM-free edit
    operator (prompt programs, every ``operator_every``-th iteration) or, in
    ``graph_gepa``, a structural mutation (every ``structure_every``-th). ``unspent``: the
    metric calls those iterations leave (None: no metric-call limit, or an older plan).
    """

    kind: ClassVar[str] = "gepa.plan"
    trial_unit: ClassVar[str] = "iterations"
    algorithm: str
    val_size: int
    train_size: int
    minibatch_size: int
    components: int
    component_selection: str
    iteration_cost: int
    acceptance_cost: int
    iterations: int | None
    unspent: int | None = None
    max_iterations: int | None = None
    reflection_iterations: int | None = None
    operator_iterations: int | None = None
    structure_iterations: int | None = None
    operator_every: int = 0
    structure_every: int | None = None
    reflection_calls: int | None = None
    merges: int = 0
    merge_cost: int = 0
    evidence_examples: int | None = None
    """The most train examples an undecided child is judged on (None: an older plan)."""
    evidence_cost: int | None = None
    """Metric calls of an iteration whose child is judged on all of them."""
    separation: Separation | None = None
    """What the budget separates: children judged on ``evidence_examples`` and accepted."""

    def planned_trials(self) -> int | None:
        return self.iterations


class ApoPlanned(PlanPayload):
    """An APO run's plan: per round, ``beam_width`` parents each get ``branch_factor``
    expansions (a critique on ``gradient_batch_size`` train examples and an edit) and
    ``operator_children`` LM-free children; the beam and the children are ranked on a val
    batch and the batch's best (up to ``beam_width`` contenders) on full val.
    ``rounds_affordable``: the rounds the metric-call budget pays for in full (None: no
    limit)."""

    kind: ClassVar[str] = "apo.plan"
    trial_unit: ClassVar[str] = "rounds"
    rounds: int
    rounds_affordable: int | None
    beam_width: int
    branch_factor: int
    operator_children: int
    gradient_batch_size: int
    val_batch_size: int
    val_size: int
    train_size: int
    expansions: int
    children: int
    lm_calls: dict[str, int] = Field(default_factory=dict)
    separation: Separation | None = None
    """What the budget separates: children (each with its critique's train batch) ranked
    on the val batch, after the seed and the rest of val for the best (None: older plan)."""

    def planned_trials(self) -> int | None:
        return self.rounds if self.rounds_affordable is None else self.rounds_affordable


class BaselinePlanned(PlanPayload):
    """A baseline run's plan: the seed on val, then each given candidate on val."""

    kind: ClassVar[str] = "baseline.plan"
    trial_unit: ClassVar[str] = "candidates"
    val_size: int
    candidates: int

    def planned_trials(self) -> int | None:
        return self.candidates


class PaceWarning(Payload):
    """A warning after the seed's evaluation: at the pace it measured
    (``seconds_per_call`` = ``seed_s`` / ``seed_calls``), the wall-time budget left
    (``left_s`` of ``wall_time_s``) holds about ``trials_held`` of the plan's
    ``planned_trials`` (``planned_calls`` metric calls in all)."""

    kind: ClassVar[str] = "pace_warning"
    plan: str
    unit: str
    wall_time_s: float
    left_s: float
    seed_s: float
    seed_calls: int
    seconds_per_call: float
    planned_calls: int
    planned_trials: int
    trials_held: int

    def message(self) -> str:
        needed = self.planned_calls * self.seconds_per_call
        return (
            f"the wall-time budget of {self.wall_time_s:g} s holds about {self.trials_held}"
            f" of the {self.planned_trials} planned {self.unit} at the measured pace of"
            f" {self.seconds_per_call:.3g} s per metric call (the seed's {self.seed_calls}"
            f" calls took {self.seed_s:.3g} s; the plan's {self.planned_calls} calls need"
            f" about {needed:.3g} s, {self.left_s:.3g} s are left)"
        )

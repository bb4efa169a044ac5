"""The planning kinds every search shares: ``BudgetPlanned``, the job's limits, recorded
before any algorithm's plan (an algorithm's own ``*.plan`` kind, a ``PlanPayload``, is
defined next to it: ``algorithms/gepa/events.py``); ``SelectPlanned``, what val separates
for a winner rule that reads a cost; ``PaceWarning``, the wall-time budget, at the pace
measured on the seed's evaluation, cannot hold the planned trials; ``Separation``, what a
plan's budget can separate."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import BaseModel, Field

from emery.core.payloads import Payload, register_payload


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


@register_payload
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


@register_payload
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


@register_payload
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

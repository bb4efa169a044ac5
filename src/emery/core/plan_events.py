"""The plans GEPA and APO record at their start (``gepa.plan``, ``apo.plan``): what will
run given the budget. Both share ``PlanPayload``'s shape with MIPRO's ``mipro.plan``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from emery.core.payloads import PlanPayload


class GepaPlanned(PlanPayload):
    """A GEPA (or ``graph_gepa``) run's plan.

    An iteration scores the parent and its child on one train minibatch
    (``iteration_cost`` metric calls); an accepted child is then scored on all of val
    (``acceptance_cost``). ``iterations`` is how many the budget pays for when no child is
    accepted (capped by ``max_iterations``; None: no limit on either), split by what
    proposes the child: the reflection LM, an LM-free edit operator (prompt programs,
    every ``operator_every``-th iteration) or, in ``graph_gepa``, a structural mutation
    (every ``structure_every``-th).
    """

    kind: ClassVar[str] = "gepa.plan"
    algorithm: str
    val_size: int
    train_size: int
    minibatch_size: int
    components: int
    component_selection: str
    iteration_cost: int
    acceptance_cost: int
    iterations: int | None
    max_iterations: int | None = None
    reflection_iterations: int | None = None
    operator_iterations: int | None = None
    structure_iterations: int | None = None
    operator_every: int = 0
    structure_every: int | None = None
    reflection_calls: int | None = None
    merges: int = 0
    merge_cost: int = 0


class ApoPlanned(PlanPayload):
    """An APO run's plan: per round, ``beam_width`` parents each get ``branch_factor``
    expansions (a critique on ``gradient_batch_size`` train examples and an edit) and
    ``operator_children`` LM-free children; the beam and the children are ranked on a val
    batch and the batch's best (up to ``beam_width`` contenders) on full val.
    ``rounds_affordable``: the rounds the metric-call budget pays for in full (None: no
    limit)."""

    kind: ClassVar[str] = "apo.plan"
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

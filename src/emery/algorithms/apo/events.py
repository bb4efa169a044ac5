"""APO's event payloads (``apo.*``), registered when this module is imported: its plan,
each round's start, critiques, edits and operator children, the beam and full-val scores."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from emery.core.payloads import Payload, PlanPayload, register_payload
from emery.core.plan_events import Separation
from emery.core.search_events import Evidence


@register_payload
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


@register_payload
class ApoRoundStarted(Payload):
    kind: ClassVar[str] = "apo.round_started"
    round: int
    parents: list[str]
    val_batch: list[str]


@register_payload
class ApoExpansionSkipped(Payload):
    kind: ClassVar[str] = "apo.expansion_skipped"
    round: int
    expansion: int
    parent_id: str
    component: str
    train_examples: list[str]
    reason: str


@register_payload
class ApoRoundCut(Payload):
    kind: ClassVar[str] = "apo.round_cut"
    round: int
    expansions_done: int
    children: int
    reason: str


class BeamMember(BaseModel):
    """``evidence``: where a beam member and a child competed for a place, this one
    against the other (a member is dropped only on ``worse``; None in older events)."""

    candidate_id: str
    val_batch_score: float | None = None
    full_val_score: float | None = None
    evidence: Evidence | None = None


@register_payload
class ApoBeamUpdated(Payload):
    kind: ClassVar[str] = "apo.beam_updated"
    round: int
    beam: list[BeamMember]
    dropped: list[BeamMember] = Field(default_factory=list)
    val_batch_size: int | None = None
    reason: str | None = None


@register_payload
class ApoFullValScored(Payload):
    kind: ClassVar[str] = "apo.full_val_scored"
    round: int
    candidate_id: str
    score: float
    n: int
    best_score: float | None
    new_best: bool


class ApoExpansion(Payload):
    """Where an APO critique or edit happened: round, expansion, parent, branch, component."""

    round: int
    expansion: int
    parent_id: str
    branch: int
    component: str


@register_payload
class ApoCritique(ApoExpansion):
    kind: ClassVar[str] = "apo.critique"
    variant: str
    train_examples: list[str]
    batch_score: float
    critique: str


@register_payload
class ApoEdit(ApoExpansion):
    kind: ClassVar[str] = "apo.edit"
    variant: str | None
    reply: str
    proposal: str | None
    accepted: bool
    reason: str | None
    child_id: str | None


@register_payload
class ApoOperatorChild(Payload):
    """An LM-free edit operator's child of a beam parent (``child_id`` None: not new)."""

    kind: ClassVar[str] = "apo.operator_child"
    round: int
    parent_id: str
    stage: str
    operator: str
    child_id: str | None
    reason: str | None = None

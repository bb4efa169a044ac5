"""GEPA's event payloads (``gepa.*``), registered when this module is imported: its plan,
the parent and minibatch of each iteration, the reflection's dataset and proposals, the
minibatch and val verdicts on a child and the merges."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from emery.core.payloads import Payload, PlanPayload, register_payload
from emery.core.plan_events import Separation
from emery.core.search_events import Evidence


@register_payload
class GepaPlanned(PlanPayload):
    """A GEPA (or ``graph_gepa``) run's plan.

    An iteration scores the parent and its child on one train minibatch (``iteration_cost``
    metric calls); an accepted child is then scored on all of val (``acceptance_cost``);
    under ``acceptance = "evidence"``, while the paired evidence is undecided and the child
    ahead, both are scored on more minibatches, up to ``evidence_examples``
    (``evidence_cost`` metric calls). ``iterations`` is how many the budget pays for when
    every child is decided on its first minibatch and none is accepted, a step starting only
    while the calls left pay for a child's minibatch and all of val (capped by
    ``max_iterations``; None: no limit on either), split by what proposes the child: the
    reflection LM, an LM-free edit operator (prompt programs, every ``operator_every``-th
    iteration offered) or, in ``graph_gepa``, a structural mutation (every
    ``structure_every``-th). The operators take every offered turn under ``operator_turns =
    "schedule"``; under ``thompson`` (those their record earns) ``operator_iterations`` is
    the most they take, ``reflection_iterations`` the fewest reflections, and
    ``reflection_calls`` counts every offered turn as a reflection; under a policy of one's
    own both are None (not known).
    ``unspent``: the metric calls those iterations leave (None: no metric-call limit, or
    an older plan).
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
    operator_turns: str = "schedule"
    structure_every: int | None = None
    reflection_calls: int | None = None
    merges: int = 0
    merge_cost: int = 0
    evidence_examples: int | None = None
    """The most train examples an undecided child is judged on: the minibatch where it
    alone decides (``two_stage``; None: an older plan)."""
    evidence_cost: int | None = None
    """Metric calls of an iteration whose child is judged on all of them."""
    separation: Separation | None = None
    """What the budget separates: children judged on ``evidence_examples`` and accepted,
    or, where the minibatch alone decides, children scored on all of val."""

    def planned_trials(self) -> int | None:
        return self.iterations


@register_payload
class GepaCandidateSelected(Payload):
    """The parent of a reflective mutation and the components to change in it."""

    kind: ClassVar[str] = "gepa.candidate_selected"
    iteration: int
    candidate_id: str
    selection: str
    val_score: float
    front_weights: dict[str, int]
    components: list[str]


@register_payload
class GepaMinibatchSampled(Payload):
    kind: ClassVar[str] = "gepa.minibatch_sampled"
    iteration: int
    example_ids: list[str]
    epoch: int


@register_payload
class GepaMinibatchSkipped(Payload):
    kind: ClassVar[str] = "gepa.minibatch_skipped"
    iteration: int
    candidate_id: str
    scores: list[float]
    reason: str


@register_payload
class GepaMinibatchAccepted(Payload):
    """A child beat its parent on the minibatch (sums of scores ``before`` and ``after``).

    ``source``: what made the child, ``reflection`` or ``operator.<name>``."""

    kind: ClassVar[str] = "gepa.minibatch_accepted"
    iteration: int
    candidate_id: str
    parent_id: str
    components: list[str] = Field(default_factory=list)
    before: float | None = None
    after: float | None = None
    reason: str | None = None
    source: str | None = None
    evidence: Evidence | None = None
    """The child against its parent, paired on the (possibly extended) minibatch; a
    rejection whose verdict is ``undecided`` was not shown worse (None in older events)."""


@register_payload
class GepaMinibatchRejected(GepaMinibatchAccepted):
    """A child did not beat its parent, or repeats a pool member (``reason``, no scores)."""

    kind: ClassVar[str] = "gepa.minibatch_rejected"


@register_payload
class GepaValEvaluated(Payload):
    """A candidate scored on all of val: it joined the pool."""

    kind: ClassVar[str] = "gepa.val_evaluated"
    iteration: int
    candidate_id: str
    score: float
    n: int


@register_payload
class GepaValRejected(GepaValEvaluated):
    """A child scored on ``n`` val examples and kept out of the pool (GEPA's ``two_stage``
    acceptance): the paired ``evidence`` against its parent there shows it worse."""

    kind: ClassVar[str] = "gepa.val_rejected"
    reason: str
    evidence: Evidence | None = None


@register_payload
class GepaWinnerChecked(Payload):
    """A new pool member whose mean val tops the best's, not shown better than the seed on
    val (GEPA's ``two_stage`` acceptance), compared with the seed on ``train_examples``
    further train examples as well: the paired ``evidence`` on val and those together, and
    whether it showed the member better (it then became the best)."""

    kind: ClassVar[str] = "gepa.winner_checked"
    iteration: int
    candidate_id: str
    train_examples: int
    evidence: Evidence
    shown_better: bool


@register_payload
class GepaReflectiveDataset(Payload):
    kind: ClassVar[str] = "gepa.reflective_dataset"
    iteration: int
    component: str
    style: str
    size: int
    example_ids: list[str]
    tokens: int
    prompt: str


@register_payload
class GepaProposal(Payload):
    kind: ClassVar[str] = "gepa.proposal"
    iteration: int
    component: str
    attempt: int
    text: str | None


@register_payload
class GepaProposalInvalid(Payload):
    kind: ClassVar[str] = "gepa.proposal_invalid"
    iteration: int
    component: str
    attempt: int
    reason: str
    reply: str


@register_payload
class GepaMergeAttempted(Payload):
    kind: ClassVar[str] = "gepa.merge_attempted"
    iteration: int
    parents: list[str]
    ancestor: str
    taken_from: dict[str, str]
    subsample: list[str]


@register_payload
class GepaMergeAccepted(Payload):
    """``scores``: first, second and merged sums on the val subsample."""

    kind: ClassVar[str] = "gepa.merge_accepted"
    iteration: int
    candidate_id: str
    parents: list[str]
    scores: dict[str, float]


@register_payload
class GepaMergeRejected(GepaMergeAccepted):
    kind: ClassVar[str] = "gepa.merge_rejected"

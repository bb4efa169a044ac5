"""Typed payloads of the kinds GEPA, APO and MIPRO emit (``gepa.*``, ``apo.*``, ``mipro.*``,
and ``proposal_sources``, which GEPA and APO share)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from emery.core.payloads import Payload, PlanPayload
from emery.core.plan_events import Separation

Verdict = Literal["better", "worse", "undecided"]


class Evidence(BaseModel):
    """One candidate against another on the same ``n`` examples (``algorithms.evidence``):
    the mean difference of their scores, its interval at ``confidence``, and the verdict
    (``better``/``worse`` only when the whole interval is above/below zero)."""

    n: int
    difference: float
    low: float
    high: float
    verdict: Verdict
    confidence: float = 0.95


# -- shared by GEPA and APO ----------------------------------------------------------------


class SourceCount(BaseModel):
    """How one source of proposals did.

    ``proposed``: children it made (each scored); ``accepted``: those kept (GEPA: beat the
    parent on the minibatch; APO: entered the beam); ``invalid``: proposals that made no
    child (an unusable LM reply, or a text already tried).
    """

    proposed: int = 0
    accepted: int = 0
    invalid: int = 0


class ProposalSources(Payload):
    """Per-source counts so far: the LM's proposals (``reflection`` in GEPA, ``apo_edit`` in
    APO) beside each LM-free edit operator (``operator.<name>``)."""

    kind: ClassVar[str] = "proposal_sources"
    algorithm: str
    iteration: int
    counts: dict[str, SourceCount]


# -- GEPA ----------------------------------------------------------------------------------


class GepaCandidateSelected(Payload):
    """The parent of a reflective mutation and the components to change in it."""

    kind: ClassVar[str] = "gepa.candidate_selected"
    iteration: int
    candidate_id: str
    selection: str
    val_score: float
    front_weights: dict[str, int]
    components: list[str]


class GepaMinibatchSampled(Payload):
    kind: ClassVar[str] = "gepa.minibatch_sampled"
    iteration: int
    example_ids: list[str]
    epoch: int


class GepaMinibatchSkipped(Payload):
    kind: ClassVar[str] = "gepa.minibatch_skipped"
    iteration: int
    candidate_id: str
    scores: list[float]
    reason: str


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


class GepaMinibatchRejected(GepaMinibatchAccepted):
    """A child did not beat its parent, or repeats a pool member (``reason``, no scores)."""

    kind: ClassVar[str] = "gepa.minibatch_rejected"


class GepaValEvaluated(Payload):
    """A candidate scored on all of val: it joined the pool."""

    kind: ClassVar[str] = "gepa.val_evaluated"
    iteration: int
    candidate_id: str
    score: float
    n: int


class GepaValRejected(GepaValEvaluated):
    """A child scored on ``n`` val examples and kept out of the pool (GEPA's ``two_stage``
    acceptance): the paired ``evidence`` against its parent there shows it worse."""

    kind: ClassVar[str] = "gepa.val_rejected"
    reason: str
    evidence: Evidence | None = None


class GraphCandidateCost(Payload):
    """What a val-scored graph candidate costs (``graph_gepa``): the LM calls its spec makes
    per example (``llm_calls``, what ``target_llm_calls`` bounds) and the calls its val
    rollouts made on average (restated answers included)."""

    kind: ClassVar[str] = "graph.candidate_cost"
    candidate_id: str
    llm_calls: int
    llm_calls_per_example: float
    score: float


class GepaReflectiveDataset(Payload):
    kind: ClassVar[str] = "gepa.reflective_dataset"
    iteration: int
    component: str
    style: str
    size: int
    example_ids: list[str]
    tokens: int
    prompt: str


class GepaProposal(Payload):
    kind: ClassVar[str] = "gepa.proposal"
    iteration: int
    component: str
    attempt: int
    text: str | None


class GepaProposalInvalid(Payload):
    kind: ClassVar[str] = "gepa.proposal_invalid"
    iteration: int
    component: str
    attempt: int
    reason: str
    reply: str


class GepaMergeAttempted(Payload):
    kind: ClassVar[str] = "gepa.merge_attempted"
    iteration: int
    parents: list[str]
    ancestor: str
    taken_from: dict[str, str]
    subsample: list[str]


class GepaMergeAccepted(Payload):
    """``scores``: first, second and merged sums on the val subsample."""

    kind: ClassVar[str] = "gepa.merge_accepted"
    iteration: int
    candidate_id: str
    parents: list[str]
    scores: dict[str, float]


class GepaMergeRejected(GepaMergeAccepted):
    kind: ClassVar[str] = "gepa.merge_rejected"


# -- APO -----------------------------------------------------------------------------------


class ApoRoundStarted(Payload):
    kind: ClassVar[str] = "apo.round_started"
    round: int
    parents: list[str]
    val_batch: list[str]


class ApoExpansionSkipped(Payload):
    kind: ClassVar[str] = "apo.expansion_skipped"
    round: int
    expansion: int
    parent_id: str
    component: str
    train_examples: list[str]
    reason: str


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


class ApoBeamUpdated(Payload):
    kind: ClassVar[str] = "apo.beam_updated"
    round: int
    beam: list[BeamMember]
    dropped: list[BeamMember] = Field(default_factory=list)
    val_batch_size: int | None = None
    reason: str | None = None


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


class ApoCritique(ApoExpansion):
    kind: ClassVar[str] = "apo.critique"
    variant: str
    train_examples: list[str]
    batch_score: float
    critique: str


class ApoEdit(ApoExpansion):
    kind: ClassVar[str] = "apo.edit"
    variant: str | None
    reply: str
    proposal: str | None
    accepted: bool
    reason: str | None
    child_id: str | None


class ApoOperatorChild(Payload):
    """An LM-free edit operator's child of a beam parent (``child_id`` None: not new)."""

    kind: ClassVar[str] = "apo.operator_child"
    round: int
    parent_id: str
    stage: str
    operator: str
    child_id: str | None
    reason: str | None = None


# -- MIPRO ---------------------------------------------------------------------------------


class MiproPlanFields(BaseModel):
    """The resolved numbers of one MIPRO run and what they will cost (upper bounds)."""

    preset: str
    num_instructions: int
    num_demo_sets: int
    num_trials: int
    minibatch_size: int
    full_eval_every: int
    tpe_startup_trials: int
    bootstrap_examples: int
    summary_calls: int
    proposal_attempts: int
    metric_calls: dict[str, int]
    lm_calls: dict[str, int]
    budget_metric_calls: int | None = None
    notes: list[str] = Field(default_factory=list)
    separation: Separation | None = None
    """What the trials can separate (None in plans stored before it was planned)."""


class MiproPlanned(PlanPayload, MiproPlanFields):
    """The resolved plan of a MIPRO run and its one-line summary."""

    kind: ClassVar[str] = "mipro.plan"
    summary: str

    def planned_trials(self) -> int | None:
        return self.num_trials

    def setup_calls(self) -> int:
        return self.metric_calls.get("bootstrap", 0)


class DemoSetSize(BaseModel):
    kind: str
    size: int


class MiproDemosBootstrapped(Payload):
    kind: ClassVar[str] = "mipro.demos_bootstrapped"
    teacher_candidate_id: str | None
    runs: int
    passed: int
    normalised: int = 0
    labeled: str
    sets: dict[str, list[DemoSetSize]]


class MiproDatasetSummary(Payload):
    kind: ClassVar[str] = "mipro.dataset_summary"
    summary: str
    observations: list[str]
    program: str


class MiproProposalRejected(Payload):
    kind: ClassVar[str] = "mipro.proposal_rejected"
    stage: str
    text: str
    reason: str


class InstructionOption(BaseModel):
    text: str
    source: str
    tip: str | None = None


class MiproInstructionsProposed(Payload):
    """A stage's instruction choices and what its proposer calls gave: ``kept`` new
    choices (``repaired``: those a repair changed), ``rejected`` replies (``reasons``: by
    kind of reason), and the calls of the retry round (``retry_calls``, part of ``calls``)."""

    kind: ClassVar[str] = "mipro.instructions_proposed"
    stage: str
    calls: int
    rejected: int
    choices: list[InstructionOption]
    kept: int = 0
    repaired: int = 0
    reasons: dict[str, int] = Field(default_factory=dict)
    retry_calls: int = 0


class MiproTrial(Payload):
    """A TPE trial scored on a val minibatch (``full``: the minibatch was all of val)."""

    kind: ClassVar[str] = "mipro.trial"
    number: int
    params: dict[str, int]
    candidate_id: str
    score: float
    n: int
    full: bool


class MiproFullEvaluation(Payload):
    """A combination promoted to full val; ``best``: it became the best candidate."""

    kind: ClassVar[str] = "mipro.full_evaluation"
    trial: int
    candidate_id: str
    params: dict[str, int]
    score: float
    minibatch_mean: float | None
    n: int
    best: bool
    final: bool
    evidence: Evidence | None = None
    """Against the best so far on the race's shared val examples (None in older events)."""


class MiproRace(Payload):
    """Pending combinations raced against the best so far on a growing shared prefix of
    val (``algorithms.evidence.race``): those the evidence showed worse than the leader
    were dropped; ``promoted`` is the leader, scored on full val next, or None when the
    best so far leads (nothing is promoted on a difference the examples cannot show)."""

    kind: ClassVar[str] = "mipro.race"
    trial: int
    racers: list[str]
    incumbent: str
    n: int
    rounds: int
    leader: str
    survivors: list[str]
    dropped: list[str]
    evidence: dict[str, Evidence] = Field(default_factory=dict)
    """Each racer against the leader on the last shared prefix."""
    metric_calls: int
    promoted: str | None
    final: bool

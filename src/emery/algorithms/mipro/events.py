"""MIPRO's event payloads (``mipro.*``), registered when this module is imported: its
plan, the bootstrapped demos, the dataset summary, the instruction proposals, the TPE
trials, the races, the full-val evaluations and the winner's confirmation on train."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from emery.core.payloads import Payload, PlanPayload, register_payload
from emery.core.plan_events import Separation
from emery.core.search_events import Evidence


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
    bootstrapped_sets: int | None = None
    """Bootstrapped demo sets per stage: the demo sets beside the seed's and the labeled
    one (its slot too when no gold output can be a demo); None in plans stored before."""


@register_payload
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


@register_payload
class MiproDemosBootstrapped(Payload):
    kind: ClassVar[str] = "mipro.demos_bootstrapped"
    teacher_candidate_id: str | None
    runs: int
    passed: int
    normalised: int = 0
    labeled: str
    sets: dict[str, list[DemoSetSize]]


@register_payload
class MiproDatasetSummary(Payload):
    kind: ClassVar[str] = "mipro.dataset_summary"
    summary: str
    observations: list[str]
    program: str


@register_payload
class MiproProposalRejected(Payload):
    kind: ClassVar[str] = "mipro.proposal_rejected"
    stage: str
    text: str
    reason: str


class InstructionOption(BaseModel):
    text: str
    source: str
    tip: str | None = None


@register_payload
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


@register_payload
class MiproTrial(Payload):
    """A TPE trial scored on a val minibatch (``full``: the minibatch was all of val)."""

    kind: ClassVar[str] = "mipro.trial"
    number: int
    params: dict[str, int]
    candidate_id: str
    score: float
    n: int
    full: bool
    stopped: bool = False
    """Shown worse than the best so far after a chunk of its minibatch: scored no further."""


@register_payload
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


@register_payload
class MiproWinnerChecked(Payload):
    """A combination whose mean val tops the best's, not shown better than the seed on val,
    compared with the seed on ``train_examples`` further train examples as well
    (``mipro.winner``): the paired ``evidence`` on val and those together, and whether it
    showed the combination better (it then became the best)."""

    kind: ClassVar[str] = "mipro.winner_checked"
    trial: int
    candidate_id: str
    train_examples: int
    evidence: Evidence
    shown_better: bool


@register_payload
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

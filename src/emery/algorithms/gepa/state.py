"""GEPA's checkpointed state: the candidate pool with per-example val scores, the fronts,
the minibatch sampler, merge bookkeeping, operator children tried, counters, the RNG and
a pipelined step's children waiting for their verdicts."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from emery.algorithms.base import AlgorithmState
from emery.algorithms.gepa.proposal import Proposal
from emery.algorithms.gepa.turns import TurnState
from emery.core.events import SourceCount
from emery.core.models import Candidate, Demo
from emery.evaluation.eval_result import EvalResult


class PoolEntry(BaseModel):
    """An accepted candidate (or the seed) and its scores on every val example.

    ``candidate`` is stored without its lineage details (the reflection prompt and reply
    live in the candidate record the engine stores), so the state stays small.
    """

    candidate: Candidate
    parents: list[str] = Field(default_factory=list)
    iteration: int = 0
    operation: str = "seed"
    components_changed: list[str] = Field(default_factory=list)
    val_scores: dict[str, float] = Field(default_factory=dict)
    val_score: float = 0.0
    llm_calls: float | None = Field(default=None, description="mean LM calls per val example")
    minibatch_before: float | None = None
    minibatch_after: float | None = None
    next_component: int = 0
    train_scores: dict[str, float] = Field(
        default_factory=dict,
        description="train example id → its score, where known (kept with failure_share only)",
    )

    @property
    def id(self) -> str:
        return self.candidate.id


class SamplerState(BaseModel):
    """Epoch-shuffled train order: ``order`` is the current epoch, ``cursor`` the next slot;
    ``shown``: how often the failure-aware sampler showed each example (``failure_batches``)."""

    order: list[str] = Field(default_factory=list)
    cursor: int = 0
    epoch: int = -1
    counts: dict[str, int] = Field(default_factory=dict)
    shown: dict[str, int] = Field(default_factory=dict)


class Counters(BaseModel):
    """What the search did, for reports and tests."""

    reflections: int = 0
    proposals: int = 0
    invalid_proposals: int = 0
    accepted: int = 0
    rejected: int = 0
    undecided: int = Field(
        default=0, description="rejected children the evidence showed neither better nor worse"
    )
    skipped_perfect: int = 0
    left_out: int = Field(
        default=0, description="two_stage: children scored on val and kept out of the pool"
    )
    stale_in_a_row: int = 0
    merges_attempted: int = 0
    merges_accepted: int = 0
    merges_rejected: int = 0


class PendingChild(BaseModel):
    """A child proposed and scored on its minibatch, waiting for its verdict: what its
    ``Mutation`` holds (``pipeline.park``), examples by id, and its results there."""

    parent: PoolEntry = Field(description="the parent as it was when the child was proposed")
    components: list[str]
    number: int
    batch: list[str]
    before: EvalResult
    shown: list[str] | None = None
    shown_before: EvalResult | None = None
    child: Candidate
    source: str
    changed: list[str]
    proposals: list[Proposal] = Field(default_factory=list)
    after: EvalResult


class Pending(BaseModel):
    """The decide half of a pipelined step (``pipelined_steps``), decided by the next
    step: its children in order, the lanes they share and the RNG that judges them."""

    children: list[PendingChild]
    slots: int
    rng_state: list[Any]


class GepaState(AlgorithmState):
    """The whole search: resume from it and GEPA continues exactly where it was."""

    pool: list[PoolEntry] = Field(default_factory=list)
    front: dict[str, list[str]] = Field(default_factory=dict)
    sampler: SamplerState = Field(default_factory=SamplerState)
    components: list[str] = Field(default_factory=list)
    merges_due: int = 0
    winner_confidence: float | None = Field(
        default=None,
        description=(
            "two_stage acceptance: a pool member becomes the best only when shown better"
            " than the seed on val at this confidence (None: the best mean val wins)"
        ),
    )
    last_accepted: bool = False
    merges_tried: list[list[str]] = Field(default_factory=list)
    counters: Counters = Field(default_factory=Counters)
    operators_tried: dict[str, list[str]] = Field(
        default_factory=dict,
        description=(
            "parent id → ids of its operator children offered (and, in graph_gepa, the keys"
            " of its structural mutations offered)"
        ),
    )
    sources: dict[str, SourceCount] = Field(
        default_factory=dict, description="reflection / operator.<name> → its counts"
    )
    labeled: dict[str, list[Demo]] = Field(
        default_factory=dict, description="stage → labeled demos from train for the operator"
    )
    turns: TurnState = Field(
        default_factory=TurnState,
        description="each source's children judged and paid off, and the turn policy's RNG",
    )
    pending: Pending | None = Field(
        default=None,
        description="pipelined steps: the last step's children, decided by the next step",
    )

    handoff_what: ClassVar[str] = "its Pareto front"

    def handoff(self) -> dict[str, float | None]:
        """The Pareto front (every candidate best on some val example), best mean first."""
        on_front = {i for ids in self.front.values() for i in ids}
        members = [item for item in self.pool if item.id in on_front]
        return {item.id: item.val_score for item in sorted(members, key=lambda i: -i.val_score)}

    def entry(self, candidate_id: str) -> PoolEntry:
        for item in self.pool:
            if item.id == candidate_id:
                return item
        raise KeyError(candidate_id)

    def has(self, candidate_id: str) -> bool:
        return any(item.id == candidate_id for item in self.pool)

    def val_table(self) -> dict[str, dict[str, float]]:
        """Candidate id → example id → val score."""
        return {item.id: item.val_scores for item in self.pool}

    def means(self) -> dict[str, float]:
        return {item.id: item.val_score for item in self.pool}

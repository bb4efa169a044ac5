"""APO's checkpointed state: the beam, the round in progress and where each stream stands."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from emery.algorithms.apo.batches import BatchCursor
from emery.algorithms.base import AlgorithmState
from emery.core.events import SourceCount
from emery.core.models import Candidate, Demo

Phase = Literal["expand", "score", "select"]


class ApoState(AlgorithmState):
    """Everything a resumed search needs, RNG and train-batch cursor included.

    A round moves through three phases, one step at a time: ``expand`` (one parent and
    branch per step: train batch, critique, edit), ``score`` (one candidate on the round's
    val batch per step) and ``select`` (full val for the batch's contenders, then keep the
    top ``beam_width``).
    ``pool`` holds the candidates the state refers to, so a resumed search needs nothing but
    the state and the stored results.
    """

    round: int = 0
    phase: Phase = "expand"
    beam: list[str] = Field(default_factory=list)
    parents: list[str] = Field(default_factory=list)
    expansions_done: int = 0
    children: list[str] = Field(default_factory=list)
    val_batch: list[str] = Field(default_factory=list)
    val_batch_scores: dict[str, float] = Field(default_factory=dict)
    full_val_scores: dict[str, float] = Field(default_factory=dict)
    pool: dict[str, Candidate] = Field(default_factory=dict)
    seen: list[str] = Field(default_factory=list)
    train_cursor: BatchCursor = Field(default_factory=BatchCursor)
    component_turn: int = 0
    critiques: int = 0
    edits_accepted: int = 0
    edits_rejected: int = 0
    expansions_skipped: int = 0
    code_invalid: int = Field(
        default=0, description="harness-code edits that did not compile or defined no run"
    )
    smoke_rejected: int = Field(
        default=0, description="new harness modules that crashed, raised, exited or hung"
    )
    operators_tried: dict[str, list[str]] = Field(
        default_factory=dict, description="parent id → ids of its operator children offered"
    )
    sources: dict[str, SourceCount] = Field(
        default_factory=dict, description="apo_edit / operator.<name> → its counts"
    )
    labeled: dict[str, list[Demo]] = Field(
        default_factory=dict, description="stage → labeled demos from train for the operator"
    )

    handoff_what: ClassVar[str] = "its beam"

    def handoff(self) -> dict[str, float | None]:
        """The beam, best full-val score first (unscored members after, in beam order)."""
        scores = self.full_val_scores
        order = sorted(self.beam, key=lambda cid: -scores[cid] if cid in scores else 1.0)
        return {cid: scores.get(cid) for cid in order}

"""MIPRO's checkpointed state: the plan, demo sets, instruction choices, trials and scores."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from emery.algorithms.base import AlgorithmState
from emery.algorithms.mipro.events import InstructionOption
from emery.algorithms.mipro.presets import MiproPlan
from emery.core.events import SourceCount
from emery.core.models import Candidate, Demo
from emery.core.search_events import Evidence
from emery.evaluation.objectives import CandidateCost
from emery.systems.prompt_layout import StageLayout

Phase = Literal["bootstrap", "summarize", "propose", "search"]
DemoSetKind = Literal["original", "empty", "labeled", "nearest", "bootstrapped", "warm"]
InstructionSource = Literal["original", "format_hint", "proposed", "operator", "warm"]
TrialKind = Literal["baseline", "minibatch", "full"]


class DemoSet(BaseModel):
    """One few-shot choice for a stage."""

    kind: DemoSetKind
    demos: list[Demo] = Field(default_factory=list)


class InstructionChoice(InstructionOption):
    """One instruction choice for a stage and where it came from (the event's
    ``InstructionOption`` with its source narrowed)."""

    source: InstructionSource


class LayoutChoice(BaseModel):
    """One layout a stage may take and the edit operators that made it."""

    layout: StageLayout = StageLayout()
    source: str = "original"


class RejectedProposal(BaseModel):
    stage: str
    text: str
    reason: str


class TrialRecord(BaseModel):
    """One scored point of the study: the choices, the candidate and its score."""

    number: int
    kind: TrialKind
    params: dict[str, int]
    candidate_id: str
    score: float
    n: int
    cost: CandidateCost | None = None
    """Its mean cost per example on the same examples, kept when the job's ``select`` rule
    reads a cost (None otherwise, and in checkpoints from before costs were kept)."""


class ComboRecord(BaseModel):
    """Everything known about one combination of choices."""

    candidate_id: str
    params: dict[str, int]
    minibatch_scores: list[float] = Field(default_factory=list)
    minibatch_n: int = 0
    full_score: float | None = None
    dropped: bool = False
    """A race showed it worse than its leader, or its trial showed it worse than the best
    so far and stopped early: never raced or promoted again."""
    checked: bool = False
    """Its mean val topped the best's without being shown better, and the confirmation on
    train has been run (``mipro.winner``): not confirmed again."""
    evidence: Evidence | None = None
    """Against the leader of the last race it ran in."""

    @property
    def minibatch_mean(self) -> float | None:
        if not self.minibatch_scores:
            return None
        return sum(self.minibatch_scores) / len(self.minibatch_scores)


class WarmProgram(BaseModel):
    """A program of an earlier job (``[job] warm_start``) and its score on this job's val."""

    candidate: Candidate
    score: float
    cost: CandidateCost | None = None
    """Its mean cost per example on this job's val (``TrialRecord.cost``)."""


class MiproState(AlgorithmState):
    """The whole search so far; each step of the search phase adds one trial."""

    phase: Phase = "bootstrap"
    plan: MiproPlan | None = None
    stages: list[str] = Field(default_factory=list)
    demo_sets: dict[str, list[DemoSet]] = Field(default_factory=dict)
    labeled_note: dict[str, str] = Field(default_factory=dict)
    teacher_candidate_id: str | None = None
    bootstrap_runs: int = 0
    bootstrap_passed: int = 0
    bootstrap_normalised: int = 0
    reasoning_stages: list[str] = Field(default_factory=list)
    """Stages whose seed replies are worked answers (no bare-answer demos for them)."""
    layouts: dict[str, list[LayoutChoice]] = Field(default_factory=dict)
    sources: dict[str, SourceCount] = Field(default_factory=dict)
    """Per source of a choice: trials that used it (``proposed``) and new bests (``accepted``)."""
    dataset_summary: str = ""
    program_description: str = ""
    instructions: dict[str, list[InstructionChoice]] = Field(default_factory=dict)
    rejected: list[RejectedProposal] = Field(default_factory=list)
    trials: list[TrialRecord] = Field(default_factory=list)
    combos: dict[str, ComboRecord] = Field(default_factory=dict)
    trials_done: int = 0
    top: list[ComboRecord] = Field(default_factory=list)
    lift: float | None = None
    warm: list[WarmProgram] = Field(default_factory=list)
    """An earlier job's programs rescored here (``mipro.warm``), best first."""

    handoff_what: ClassVar[str] = "its programs scored on full val"

    def handoff(self) -> dict[str, float | None]:
        """The combinations scored on full val, best first."""
        scored = [c for c in self.combos.values() if c.full_score is not None]
        scored.sort(key=lambda combo: -(combo.full_score or 0.0))
        return {combo.candidate_id: combo.full_score for combo in scored}

    def resolved_plan(self) -> MiproPlan:
        """The plan made in ``start`` (every later step needs it)."""
        if self.plan is None:
            raise RuntimeError("mipro state has no plan: start() was not run")
        return self.plan

    def spaces(self) -> dict[str, int]:
        """Each categorical parameter of the study and its number of choices."""
        out: dict[str, int] = {}
        for stage in self.stages:
            out[f"{stage}.instruction"] = len(self.instructions.get(stage, [])) or 1
            out[f"{stage}.demos"] = len(self.demo_sets.get(stage, [])) or 1
            if len(self.layouts.get(stage, [])) > 1:
                out[f"{stage}.layout"] = len(self.layouts[stage])
        return out

"""The contract between the job engine and a search algorithm.

An algorithm keeps its whole state in one pydantic model (RNG state included), reads and
writes only through the ``SearchContext``, and works in steps: ``start`` scores the seed on
val (the baseline), each ``step`` is one iteration. After ``start`` and after every step
the engine stores, in one transaction, the step's evaluations, candidates and events and a
checkpoint of the state; a resumed job reloads the state and calls ``step`` again.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, Field

from emery.algorithms.restate_sharing import share_readable_runs
from emery.core.events import CandidateProposed, Event, Payload
from emery.core.models import Candidate, Dataset, Example, Split
from emery.core.settings import Settings
from emery.evaluation.budget import Budget
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.selection import BEST_SCORE, SelectRule
from emery.evaluation.service import EvaluationService
from emery.lm.base import LM
from emery.systems.base import System


class AlgorithmSettings(Settings):
    """Base of ``[algorithm.<name>]`` settings: unknown keys, ``inf`` and ``nan`` are errors."""


class AlgorithmState(BaseModel):
    """Base of every algorithm's checkpointed state."""

    iteration: int = 0
    done: bool = False
    done_reason: str | None = None
    seed_candidate_id: str = ""
    baseline_val_score: float | None = None
    best_candidate_id: str = ""
    best_val_score: float | None = None
    rng_state: list[Any] = Field(default_factory=list)

    handoff_what: ClassVar[str] = "its best candidate"

    def handoff(self) -> dict[str, float | None]:
        """The candidates a later job warm-started from this search takes, best first, with
        their val scores here (``[job] warm_start``; ``handoff_what`` names them): here the
        best; an algorithm with a pool, a beam or trials hands over more."""
        return {self.best_candidate_id: self.best_val_score} if self.best_candidate_id else {}


WARM_START = "warm_start"
"""The lineage operation of a candidate taken from an earlier job (``[job] warm_start``)."""


@dataclass(frozen=True)
class WarmStart:
    """An earlier job's candidates handed to a new search on the same system.

    ``candidates``: best first, at most ``[job] warm_start_candidates``, each with lineage
    ``warm_start`` naming the earlier job and candidate in its details; ``what`` says in
    words which of the earlier search's candidates they are.
    """

    job_id: str
    algorithm: str
    candidates: tuple[Candidate, ...]
    what: str = "its best candidate"


def save_rng(rng: random.Random) -> list[Any]:
    """``rng``'s state as JSON-able lists."""
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def load_rng(state: list[Any], seed: int) -> random.Random:
    """A Random restored from ``save_rng`` output, or seeded fresh when there is none."""
    rng = random.Random(seed)
    if state:
        version, internal, gauss = state
        rng.setstate((version, tuple(internal), gauss))
    return rng


@dataclass
class StepLog:
    """What one step produced besides evaluations: events and new candidates, in order."""

    events: list[Event] = field(default_factory=list)
    candidates: dict[str, Candidate] = field(default_factory=dict)

    def add(self, item: Event) -> None:
        self.events.append(item)

    def drain(self) -> tuple[list[Event], list[Candidate]]:
        events, candidates = list(self.events), list(self.candidates.values())
        self.events.clear()
        self.candidates.clear()
        return events, candidates


@dataclass
class SearchContext:
    """Everything an algorithm may touch."""

    dataset: Dataset
    system: System
    seed_candidate: Candidate
    evaluations: EvaluationService
    lms: Mapping[str, LM]
    budget: Budget
    seed: int = 0
    log: StepLog = field(default_factory=StepLog)
    candidates: dict[str, Candidate] = field(default_factory=dict)
    reviewer_notes: list[str] = field(default_factory=list)
    """Reasons a person gave for rejecting candidates (``[job] approve``), oldest first;
    reflection prompts show the latest (``algorithms.approval.with_reviewer_notes``)."""
    warm: WarmStart | None = None
    """An earlier job's candidates to start from (``[job] warm_start``); read in ``start``."""
    earlier_notes: tuple[str, ...] = ()
    """The reasons people gave for rejecting the warm start's earlier job's candidates
    before this job was created, oldest first: shown before this job's own reviewer notes
    (set on every start, so a resumed job's prompts are the same)."""
    objectives: tuple[str, ...] = ("score",)
    """The job's ``[job] objectives``: with a cost among them, GEPA also accepts a child as
    good as its parent and cheaper (``algorithms.cost_acceptance``)."""
    select: SelectRule = BEST_SCORE
    """The job's ``[job] select`` rule: MIPRO's study aims for what it chooses
    (``SelectRule.aim``)."""

    @property
    def train(self) -> list[Example]:
        return self.dataset.train

    @property
    def val(self) -> list[Example]:
        return self.dataset.val

    def lm(self, role: str) -> LM:
        """The model for ``role`` (reflection, proposer, judge, task)."""
        return self.lms[role]

    def emit(self, payload: Payload) -> None:
        """Record the event ``payload`` is the data of (its model names the kind)."""
        self.log.add(Event.of(payload))

    def add_candidate(self, candidate: Candidate) -> Candidate:
        """Record a candidate (the seed, or a proposal, which counts against the budget).

        Returns the stored candidate: proposing text that already exists returns the
        earlier candidate with its original lineage.
        """
        existing = self.candidates.get(candidate.id)
        if existing is not None:
            return existing
        self.candidates[candidate.id] = candidate
        self.log.candidates[candidate.id] = candidate
        if candidate.lineage.operation not in ("seed", WARM_START):
            self.budget.count_proposal()
            self.emit(
                CandidateProposed(
                    candidate_id=candidate.id,
                    parents=list(candidate.lineage.parents),
                    operation=candidate.lineage.operation,
                    components=sorted(
                        name
                        for name, text in candidate.components.items()
                        if not candidate.lineage.parents
                        or self._parent_text(candidate, name) != text
                    ),
                ),
            )
        return candidate

    def _parent_text(self, candidate: Candidate, component: str) -> str | None:
        parent = self.candidates.get(candidate.lineage.parents[0])
        return None if parent is None else parent.components.get(component)

    async def evaluate(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split,
        concurrency: int | None = None,
    ) -> EvalResult:
        """Score ``candidate``; stored results are free, new rollouts are charged;
        ``concurrency``: the rollouts at once (default ``[runtime] concurrency``). A child
        that only turns the answer stage on takes its parent's readable runs first
        (``restate_sharing``)."""
        share_readable_runs(self.evaluations, self.candidates, candidate, examples, split)
        return await self.evaluations.evaluate(candidate, examples, split, concurrency=concurrency)


S = TypeVar("S", bound=AlgorithmState)


class Algorithm(Protocol[S]):
    """A search loop over states of type ``S``; ``state_type`` loads checkpoints."""

    name: ClassVar[str]
    state_type: type[S]

    async def start(self, ctx: SearchContext) -> S:
        """Register and score the seed on val (the baseline); return the initial state."""
        ...

    async def step(self, ctx: SearchContext, state: S) -> S:
        """One iteration; set ``state.done`` when the search has nothing left to try."""
        ...

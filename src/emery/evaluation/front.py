"""The winner a job's ``select`` rule chose and the front it chose from, as the job's result
records them: every candidate scored on all of val with its mean val score and cost per
example, which of them are on the Pareto front of the job's objectives, the winner and
the search's own best."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from emery.evaluation.objectives import OBJECTIVES, CandidateCost, Scored, pareto_front
from emery.evaluation.selection import SelectRule


class FrontMember(BaseModel):
    """One candidate scored on all of val: its val score, its mean cost per example and
    whether it is on the front."""

    candidate_id: str
    score: float
    n: int
    cost: CandidateCost
    on_front: bool = False


class CostFront(BaseModel):
    """What ``[job] objectives`` and ``select`` decided (``winner_id``; ``best_score_id``
    is the search's own best, which ``best_score`` would have chosen)."""

    objectives: list[str]
    select: str
    winner_id: str
    best_score_id: str
    candidates: list[FrontMember] = Field(default_factory=list)

    @property
    def front(self) -> list[FrontMember]:
        return [member for member in self.candidates if member.on_front]

    def member(self, candidate_id: str) -> FrontMember | None:
        return next((m for m in self.candidates if m.candidate_id == candidate_id), None)


def choose(
    pool: Sequence[Scored], best: Scored, objectives: Sequence[str], rule: SelectRule
) -> CostFront:
    """The front of ``pool`` over ``objectives`` and the winner ``rule`` picks (``best``,
    the search's own best, is one of ``pool``)."""
    front = {s.candidate_id for s in pareto_front(pool, [OBJECTIVES[n] for n in objectives])}
    winner = rule.choose(pool, best)
    return CostFront(
        objectives=list(objectives),
        select=rule.text,
        winner_id=winner.candidate_id,
        best_score_id=best.candidate_id,
        candidates=[
            FrontMember(
                candidate_id=s.candidate_id,
                score=s.mean,
                n=len(s.scores),
                cost=s.cost,
                on_front=s.candidate_id in front,
            )
            for s in pool
        ],
    )

"""What a candidate is judged by beyond its score: its mean cost per example on val, the
objectives a job names (``[job] objectives``) and the Pareto front over them.

Each objective is a small strategy (``Objective``) that reads a candidate's val results
and gives the values a front compares, oriented so that higher is better. The score gives
one value per example (a candidate stays on the front while it is the best on some
example, as GEPA's front keeps it); a cost gives its mean per example, negated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, Field

from emery.core.example_result import ExampleResult
from emery.evaluation.eval_result import EvalResult


class CandidateCost(BaseModel):
    """A candidate's mean cost per example on val: LM tokens by role (every model the run
    called, the judge included), LM calls, USD and wall seconds per example."""

    n: int = 0
    tokens_by_role: dict[str, float] = Field(default_factory=dict)
    lm_calls: float = 0.0
    cost_usd: float = 0.0
    latency_s: float = 0.0

    @property
    def tokens(self) -> float:
        return sum(self.tokens_by_role.values())

    def value(self, name: str) -> float:
        """The mean of the cost ``name`` (one of ``COSTS``)."""
        return self.tokens if name == "tokens" else float(getattr(self, name))


def cost_per_example(results: Sequence[ExampleResult]) -> CandidateCost:
    """The mean cost of ``results``: a run costs what its calls would without the LM
    cache (a call the cache answered counts the tokens and USD it took when first asked).
    A run reports its usage by role when its models are metered (``lm_usage``: every job's
    are), the judge's included; one without it counts the task tokens it paid for."""
    n = len(results)
    if n == 0:
        return CandidateCost()
    tokens: dict[str, float] = {}
    cost = 0.0
    for result in results:
        if result.lm_usage:
            for role, usage in result.lm_usage.items():
                tokens[role] = tokens.get(role, 0.0) + usage.budget_tokens
                cost += usage.budget_cost_usd
        else:
            tokens["task"] = tokens.get("task", 0.0) + result.usage.total_tokens
    return CandidateCost(
        n=n,
        tokens_by_role={role: total / n for role, total in sorted(tokens.items())},
        lm_calls=sum(r.lm_calls for r in results) / n,
        cost_usd=cost / n,
        latency_s=sum(r.latency_s for r in results) / n,
    )


@dataclass(frozen=True)
class Scored:
    """A candidate with its val scores (in val order), its val score (``mean``: the mean,
    or the batch's rank agreement, as ``EvalResult.mean``) and its mean cost."""

    candidate_id: str
    scores: tuple[float, ...]
    mean: float
    cost: CandidateCost

    @classmethod
    def of(cls, candidate_id: str, results: Sequence[ExampleResult]) -> Scored:
        batch = EvalResult(candidate_id=candidate_id, split="val", results=list(results))
        return cls(candidate_id, tuple(batch.scores), batch.mean, cost_per_example(results))


class Objective(Protocol):
    """One thing a front compares candidates on."""

    @property
    def name(self) -> str: ...

    def values(self, scored: Scored) -> tuple[float, ...]:
        """What the front compares, higher is better."""
        ...

    def mean(self, scored: Scored) -> float:
        """The figure a report shows (the mean score, or the mean cost per example)."""
        ...


@dataclass(frozen=True)
class ScoreObjective:
    """The score, compared example by example."""

    name: str = "score"

    def values(self, scored: Scored) -> tuple[float, ...]:
        return scored.scores

    def mean(self, scored: Scored) -> float:
        return scored.mean


@dataclass(frozen=True)
class CostObjective:
    """A mean cost per example (``tokens``, ``lm_calls``, ``cost_usd``, ``latency_s``),
    lower is better."""

    name: str

    def values(self, scored: Scored) -> tuple[float, ...]:
        return (-scored.cost.value(self.name),)

    def mean(self, scored: Scored) -> float:
        return scored.cost.value(self.name)


COSTS = ("tokens", "lm_calls", "cost_usd", "latency_s")
"""The costs an objective or a budget may name."""

OBJECTIVES: Mapping[str, Objective] = {
    "score": ScoreObjective(),
    **{name: CostObjective(name) for name in COSTS},
}


def named_costs(objectives: Sequence[str]) -> tuple[str, ...]:
    """The costs among ``objectives``, in their order (empty on the defaults)."""
    return tuple(name for name in objectives if name in COSTS)


def check_objectives(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as given, if they are known objectives that include the score, once each;
    ValueError in words otherwise (for the config's validator)."""
    for name in names:
        if name not in OBJECTIVES:
            raise ValueError(f"unknown objective {name!r}; valid: {', '.join(OBJECTIVES)}")
    if "score" not in names:
        raise ValueError('the objectives must include "score"')
    if len(set(names)) != len(names):
        raise ValueError("each objective may be named once")
    return tuple(names)


def dominates(a: Scored, b: Scored, objectives: Sequence[Objective]) -> bool:
    """Whether ``a`` is at least as good as ``b`` on every value and better on one."""
    better = False
    for objective in objectives:
        for mine, theirs in zip(objective.values(a), objective.values(b), strict=True):
            if mine < theirs:
                return False
            better = better or mine > theirs
    return better


def pareto_front(candidates: Sequence[Scored], objectives: Sequence[Objective]) -> list[Scored]:
    """The candidates no other candidate dominates, in the order given (one of each set of
    candidates with equal values: the first)."""
    front: list[Scored] = []
    for index, candidate in enumerate(candidates):
        if any(dominates(other, candidate, objectives) for other in candidates):
            continue
        if any(_equal(candidate, earlier, objectives) for earlier in candidates[:index]):
            continue
        front.append(candidate)
    return front


def _equal(a: Scored, b: Scored, objectives: Sequence[Objective]) -> bool:
    return all(objective.values(a) == objective.values(b) for objective in objectives)

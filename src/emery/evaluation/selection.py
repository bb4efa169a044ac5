"""How a job picks its winner among the candidates scored on val (``[job] select``).

``parse_select`` turns the setting into a small rule object:

- ``"best_score"`` (the default): the search's own best candidate;
- ``"cheapest_within:0.02"``: the cheapest candidate (by the first cost in ``[job]
  objectives``) whose mean val score is at most 0.02 below the best's;
- ``"budget:tokens=500"`` (costs joined by ``,``): the best mean val score among the
  candidates whose mean cost per example stays within every limit named (the search's best
  when none does).

Ties go to the higher score, then to the earlier candidate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from emery.evaluation.objectives import COSTS, CandidateCost, Scored, named_costs

EPSILON = 1e-9
"""Slack for float sums: a score 0.02 below the best is within 0.02."""


class SelectRule(Protocol):
    """Picks the winner among ``pool`` (every candidate scored on all of val, ``best``
    among them: the search's own best), and tells a search what to aim for."""

    @property
    def text(self) -> str:
        """The setting as written."""
        ...

    @property
    def costs(self) -> tuple[str, ...]:
        """The costs the rule reads (none: the score alone)."""
        ...

    @property
    def margin(self) -> float | None:
        """The score margin below the best the rule chooses within (None: no margin)."""
        ...

    def choose(self, pool: Sequence[Scored], best: Scored) -> Scored: ...

    def aim(
        self, score: float, cost: CandidateCost, best_score: float, best_cost: CandidateCost
    ) -> tuple[float, ...]:
        """The values, each higher-is-better, that a search serving this rule maximizes for
        a candidate at ``score`` and ``cost`` when the best so far is at ``best_score`` and
        ``best_cost`` (one value: a single objective; more: a front over them)."""
        ...


@dataclass(frozen=True)
class BestScore:
    """The search's own best candidate."""

    text: str = "best_score"

    @property
    def costs(self) -> tuple[str, ...]:
        return ()

    @property
    def margin(self) -> None:
        return None

    def choose(self, pool: Sequence[Scored], best: Scored) -> Scored:
        return best

    def aim(
        self, score: float, cost: CandidateCost, best_score: float, best_cost: CandidateCost
    ) -> tuple[float, ...]:
        return (score,)


@dataclass(frozen=True)
class CheapestWithin:
    """The cheapest candidate within ``margin`` of the best's mean val score."""

    margin: float
    cost: str
    text: str

    @property
    def costs(self) -> tuple[str, ...]:
        return (self.cost,)

    def choose(self, pool: Sequence[Scored], best: Scored) -> Scored:
        floor = best.mean - self.margin - EPSILON
        near = [best, *(s for s in pool if s.mean >= floor and s is not best)]
        return min(near, key=lambda s: (s.cost.value(self.cost), -s.mean))

    def aim(
        self, score: float, cost: CandidateCost, best_score: float, best_cost: CandidateCost
    ) -> tuple[float, ...]:
        """The score and the cost saved: a candidate more than the margin below the best
        counts at the best's cost, so the best dominates it and the front holds only the
        candidates this rule could choose."""
        near = score >= best_score - self.margin - EPSILON
        return (score, -(cost if near else best_cost).value(self.cost))


@dataclass(frozen=True)
class WithinBudget:
    """The best mean val score among candidates within every per-example cost limit."""

    limits: Mapping[str, float]
    text: str

    @property
    def costs(self) -> tuple[str, ...]:
        return tuple(self.limits)

    @property
    def margin(self) -> None:
        return None

    def fits(self, scored: Scored) -> bool:
        return self.within(scored.cost)

    def within(self, cost: CandidateCost) -> bool:
        return all(cost.value(name) <= limit for name, limit in self.limits.items())

    def choose(self, pool: Sequence[Scored], best: Scored) -> Scored:
        fitting = [best] if self.fits(best) else []
        fitting += [s for s in pool if s is not best and self.fits(s)]
        if not fitting:
            return best
        return max(fitting, key=lambda s: s.mean)

    def aim(
        self, score: float, cost: CandidateCost, best_score: float, best_cost: CandidateCost
    ) -> tuple[float, ...]:
        """The score; a candidate over a limit counts below every one within them (scores
        lie in [-1, 1])."""
        return (score if self.within(cost) else score - 2.0,)


BEST_SCORE = BestScore()
"""The default rule."""

SELECT_FORMS = '"best_score", "cheapest_within:<margin>" or "budget:<cost>=<limit>"'


def parse_select(text: str, objectives: Sequence[str] = ("score",)) -> SelectRule:
    """The rule ``text`` names (module docstring); ValueError in words otherwise.
    ``objectives`` are the job's: ``cheapest_within`` minimizes the first cost among them."""
    name, _, argument = text.partition(":")
    name, argument = name.strip(), argument.strip()
    if name == "best_score" and not argument:
        return BestScore()
    if name == "cheapest_within":
        costs = named_costs(objectives)
        if not costs:
            raise ValueError(
                f"{text!r} needs a cost among the objectives, e.g. objectives ="
                f' ["score", "tokens"] (costs: {", ".join(COSTS)})'
            )
        return CheapestWithin(_margin(text, argument), costs[0], text)
    if name == "budget":
        return WithinBudget(_limits(text, argument), text)
    raise ValueError(f"unknown rule {text!r}; use {SELECT_FORMS}")


def _margin(text: str, argument: str) -> float:
    value = _number(text, argument, "a score margin such as 0.02")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{text!r}: the margin is a score difference from 0 to 1")
    return value


def _limits(text: str, argument: str) -> dict[str, float]:
    limits: dict[str, float] = {}
    for part in argument.split(","):
        cost, equals, limit = part.partition("=")
        cost = cost.strip()
        if not equals or cost not in COSTS:
            raise ValueError(
                f"{text!r}: write budget:<cost>=<limit> per example, cost one of {', '.join(COSTS)}"
            )
        value = _number(text, limit, "a limit per example")
        if value < 0:
            raise ValueError(f"{text!r}: a limit cannot be negative")
        limits[cost] = value
    return limits


def _number(text: str, argument: str, what: str) -> float:
    try:
        value = float(argument)
    except ValueError:
        raise ValueError(f"{text!r}: expected {what} after ':'") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r}: {what} must be a finite number")
    return value

"""Whose turn it is: which iterations propose an edit-operator child instead of reflecting.

On a prompt program GEPA has two sources of children: the reflection LM and the LM-free
edit operators (``operators.py``). An iteration the turn policy gives to the operators
proposes the parent's next untried operator child (the reflection when none is left); the
others reflect, with the operators as the fallback when the reflection gives nothing
usable (``operator_fallback``). The policy is a strategy: ``operator_turns`` names a
``TurnKind`` in ``TURN_POLICIES`` (``core/plugins.py``): a built-in (``thompson``,
``schedule``), a ``"module:attr"`` of your own, or an entry point of the
``emery.turn_policies`` group.

GEPA keeps each source's record in the checkpointed state (``TurnState``): its tries (its
children judged, and the reflections that made no usable child), and those that **paid
off**, that is made a child that joined the pool with a mean val above its parent's (a
rejected child, one kept out of the pool, one that joined no better than its parent and a
reflection that made nothing did not). A step asks the policy once, before it proposes
anything, for its iterations' turns, with the record as it was then and an RNG of its own
(``TurnState.rng_state``, checkpointed): a resumed search gives the same turns, and the
search's other draws (parents, minibatches) do not depend on the policy's.

Both built-ins offer the operators every ``operator_every``-th iteration (0: none; the
operators only as the fallback):

- ``thompson`` (default) keeps an offered turn by Thompson sampling on a Beta posterior
  per source over "a try pays off": it draws a rate for each source from Beta(1 + paid
  off, 1 + not) and keeps the turn when the operators' draw is the higher, and always
  while no operator child has been judged (each source is tried before its record
  speaks). A turn not kept reflects. So the operators keep their turns where their
  children pay off (on real data the restating answer stage, labeled demos and format
  lines made the winners) and lose most of them where they do not (the mock's task rewards
  phrases only), and never get more than the schedule gives them.
- ``schedule`` takes every offered turn (the rule before ``thompson``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from emery.core.plugins import PluginRegistry

if TYPE_CHECKING:
    from emery.algorithms.gepa.settings import GepaSettings

Source = Literal["operator", "reflection"]


class SourceRecord(BaseModel):
    """What one source's tries did (``tries``: its children judged and the reflections
    that made no usable child), and how many paid off (``paid``: a child that joined the
    pool with a mean val above its parent's)."""

    tries: int = 0
    paid: int = 0


class TurnState(BaseModel):
    """The turn policy's checkpointed part: each source's record and the policy's RNG."""

    record: dict[str, SourceRecord] = Field(default_factory=dict)
    rng_state: list[Any] = Field(default_factory=list)

    def of(self, source: Source) -> SourceRecord:
        """``source``'s record (empty before its first child)."""
        return self.record.get(source, SourceRecord())


def source_of(operation: str) -> Source | None:
    """The turn source a child's ``source`` counts for (``operator.<name>``, ``reflection``);
    None for another kind (graph_gepa's structural children)."""
    if operation.startswith("operator."):
        return "operator"
    if operation == "reflection":
        return "reflection"
    return None


def note_try(turns: TurnState, operation: str) -> None:
    """Count a try of ``operation``'s source: a judged child, or a reflection that made no
    usable child."""
    source = source_of(operation)
    if source is not None:
        turns.record.setdefault(source, SourceRecord()).tries += 1


def note_paid(turns: TurnState, operation: str) -> None:
    """Count a try already counted (``note_try``) as having paid off."""
    source = source_of(operation)
    if source is not None:
        turns.record.setdefault(source, SourceRecord()).paid += 1


@runtime_checkable
class TurnPolicy(Protocol):
    """Which iterations propose an operator child (module doc)."""

    def operator_turns(
        self, turns: TurnState, numbers: Sequence[int], rng: random.Random
    ) -> frozenset[int]:
        """Those of the iterations ``numbers`` (one step's) that go to the operators, from
        the record in ``turns``; draw only from ``rng`` (it is checkpointed)."""
        ...


@dataclass(frozen=True)
class Schedule:
    """Every ``every``-th iteration (0: none; the operators only as the fallback)."""

    every: int = 3

    def operator_turns(
        self, turns: TurnState, numbers: Sequence[int], rng: random.Random
    ) -> frozenset[int]:
        return frozenset(n for n in numbers if self.every and n % self.every == 0)


@dataclass(frozen=True)
class Thompson:
    """Every ``every``-th iteration offered to the operators and kept by Thompson sampling
    on the sources' Beta(``prior`` + record) posteriors (module doc)."""

    every: int = 3
    prior: tuple[float, float] = (1.0, 1.0)

    def operator_turns(
        self, turns: TurnState, numbers: Sequence[int], rng: random.Random
    ) -> frozenset[int]:
        offered = Schedule(self.every).operator_turns(turns, numbers, rng)
        if not turns.of("operator").tries:
            return offered
        operator = _posterior(turns.of("operator"), self.prior)
        reflection = _posterior(turns.of("reflection"), self.prior)
        return frozenset(
            number
            for number in sorted(offered)
            if rng.betavariate(*operator) > rng.betavariate(*reflection)
        )


def _posterior(record: SourceRecord, prior: tuple[float, float]) -> tuple[float, float]:
    """Beta(prior successes + paid off, prior failures + not)."""
    return prior[0] + record.paid, prior[1] + record.tries - record.paid


@dataclass(frozen=True)
class TurnKind:
    """A turn policy GEPA can be told to use: ``build`` makes it from GEPA's settings."""

    name: str
    build: Callable[[GepaSettings], TurnPolicy]


THOMPSON = TurnKind("thompson", lambda settings: Thompson(settings.operator_every))
SCHEDULE = TurnKind("schedule", lambda settings: Schedule(settings.operator_every))

TURN_POLICIES = PluginRegistry(
    what="turn policy",
    plural="turn policies",
    where="algorithm.gepa.operator_turns",
    builtins={kind.name: f"{__name__}:{kind.name.upper()}" for kind in (THOMPSON, SCHEDULE)},
    attribute="TURNS",
    group="emery.turn_policies",
    type=TurnKind,
)


def turn_policy(settings: GepaSettings) -> TurnPolicy:
    """The policy ``settings.operator_turns`` names."""
    return TURN_POLICIES.get(settings.operator_turns).build(settings)

"""GEPA's acceptance rule: which children join the pool and which pool member may win.

The rule is a strategy: ``acceptance`` names an ``AcceptanceKind`` in ``ACCEPTANCE_RULES``
(``core/plugins.py``): a built-in (``evidence``, ``two_stage``), a ``"module:attr"`` of
your own, or an entry point of the ``emery.acceptance_rules`` group. The kind builds an
``AcceptanceRule`` from GEPA's settings, which answers what GEPA's step asks of it:

- ``accepts``: the verdict on a child's train results against its parent's (the paired
  evidence, or None for a batch scored by rank agreement); a cost among ``[job]
  objectives`` may still keep a child it rejects (``algorithms.cost_acceptance``);
- ``further_evidence``: whether a child its minibatch leaves undecided is scored with its
  parent on more train examples (``judging.py``, up to ``max_evidence_examples``), or its
  minibatch alone decides; then its verdict is known once the minibatch is scored, so
  ``pipelined_steps`` is on by default at k > 1 (``pipeline.py``);
- ``val_gate``: whether an accepted child is scored on val in chunks against its parent
  and kept out of the pool when shown worse there (``val_gate.score_on_val``), or scored
  on all of val and joins;
- ``winner_confidence``: the two-sided confidence at which a pool member must be shown
  better than the seed to be returned as the winner (on val, or with ``winner_examples``
  further train examples: ``val_gate.confirm_winner``); None: the best mean val wins.

``evidence`` accepts a child the paired evidence on train shows better (more minibatches
while undecided); ``two_stage`` accepts one better on its minibatch, gates it on val and
guards the winner at ``winner_confirmation.WINNER_CONFIDENCE``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from emery.algorithms.winner_confirmation import WINNER_CONFIDENCE
from emery.core.plugins import PluginRegistry
from emery.core.search_events import Evidence
from emery.evaluation.eval_result import EvalResult

if TYPE_CHECKING:
    from emery.algorithms.gepa.settings import GepaSettings


@runtime_checkable
class AcceptanceRule(Protocol):
    """What GEPA asks its acceptance rule (module doc)."""

    @property
    def further_evidence(self) -> bool:
        """Whether an undecided child is judged on more train examples (else its minibatch
        alone decides, and steps pipeline by default)."""
        ...

    @property
    def val_gate(self) -> bool:
        """Whether an accepted child goes through val in chunks against its parent (else it
        is scored on all of val and joins the pool)."""
        ...

    @property
    def winner_confidence(self) -> float | None:
        """The confidence at which a winner must be shown better than the seed; None: none."""
        ...

    def accepts(self, before: EvalResult, after: EvalResult, evidence: Evidence | None) -> bool:
        """Whether the child (``after``) is accepted against its parent (``before``) on the
        same train examples; ``evidence`` is their paired evidence (None for a batch
        scored by rank agreement, which has no per-example pairs)."""
        ...


def by_sums(before: EvalResult, after: EvalResult, loose: bool) -> bool:
    """The child's total above its parent's (with ``loose``, not below)."""
    return after.total > before.total or (loose and after.total >= before.total)


@dataclass(frozen=True)
class EvidenceRule:
    """Accepted when the paired evidence shows the child better (``loose``: also when it is
    undecided and the child is not behind); more train examples while undecided."""

    loose: bool = False
    further_evidence: bool = True
    val_gate: bool = False
    winner_confidence: float | None = None

    def accepts(self, before: EvalResult, after: EvalResult, evidence: Evidence | None) -> bool:
        if evidence is None:
            return by_sums(before, after, self.loose)
        if evidence.verdict == "better":
            return True
        return self.loose and evidence.verdict == "undecided" and evidence.difference >= 0


@dataclass(frozen=True)
class TwoStageRule:
    """Accepted when better on its minibatch (``loose``: not behind), then gated on val;
    the winner guarded at ``WINNER_CONFIDENCE``."""

    loose: bool = False
    further_evidence: bool = False
    val_gate: bool = True
    winner_confidence: float | None = WINNER_CONFIDENCE

    def accepts(self, before: EvalResult, after: EvalResult, evidence: Evidence | None) -> bool:
        if evidence is None:
            return by_sums(before, after, self.loose)
        return evidence.difference > 0 or (self.loose and evidence.difference >= 0)


@dataclass(frozen=True)
class AcceptanceKind:
    """An acceptance rule GEPA can be told to use: ``build`` makes it from GEPA's settings
    (``accept``, or any other)."""

    name: str
    build: Callable[[GepaSettings], AcceptanceRule]


def _loose(settings: GepaSettings) -> bool:
    return settings.accept == "improvement_or_equal"


EVIDENCE = AcceptanceKind("evidence", lambda settings: EvidenceRule(_loose(settings)))
TWO_STAGE = AcceptanceKind("two_stage", lambda settings: TwoStageRule(_loose(settings)))

ACCEPTANCE_RULES = PluginRegistry(
    what="acceptance rule",
    plural="acceptance rules",
    where="algorithm.gepa.acceptance",
    builtins={kind.name: f"{__name__}:{kind.name.upper()}" for kind in (EVIDENCE, TWO_STAGE)},
    attribute="RULE",
    group="emery.acceptance_rules",
    type=AcceptanceKind,
)


def acceptance_rule(settings: GepaSettings) -> AcceptanceRule:
    """The rule ``settings.acceptance`` names."""
    return ACCEPTANCE_RULES.get(settings.acceptance).build(settings)

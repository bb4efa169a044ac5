"""What several search algorithms share in their events: ``Evidence`` (one candidate against
another on the same examples), ``SourceCount`` and the ``proposal_sources`` kind (GEPA's and
APO's counts per source of proposals). Each algorithm's own kinds are defined next to it
(``algorithms/gepa/events.py``, ``algorithms/apo/events.py``, ``algorithms/mipro/events.py``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel

from emery.core.payloads import Payload, register_payload

Verdict = Literal["better", "worse", "undecided"]


class Evidence(BaseModel):
    """One candidate against another on the same ``n`` examples (``algorithms.evidence``):
    the mean difference of their scores, its interval at ``confidence``, and the verdict
    (``better``/``worse`` only when the whole interval is above/below zero)."""

    n: int
    difference: float
    low: float
    high: float
    verdict: Verdict
    confidence: float = 0.95


class SourceCount(BaseModel):
    """How one source of proposals did.

    ``proposed``: children it made (each scored); ``accepted``: those kept (GEPA: beat the
    parent on the minibatch; APO: entered the beam); ``invalid``: proposals that made no
    child (an unusable LM reply, or a text already tried).
    """

    proposed: int = 0
    accepted: int = 0
    invalid: int = 0


@register_payload
class ProposalSources(Payload):
    """Per-source counts so far: the LM's proposals (``reflection`` in GEPA, ``apo_edit`` in
    APO) beside each LM-free edit operator (``operator.<name>``)."""

    kind: ClassVar[str] = "proposal_sources"
    algorithm: str
    iteration: int
    counts: dict[str, SourceCount]

"""``graph_gepa``'s own event payload (``graph.candidate_cost``); the rest of what it emits
is GEPA's (``algorithms/gepa/events.py``)."""

from __future__ import annotations

from typing import ClassVar

from emery.core.payloads import Payload, register_payload


@register_payload
class GraphCandidateCost(Payload):
    """What a val-scored graph candidate costs (``graph_gepa``): the LM calls its spec makes
    per example (``llm_calls``, what ``target_llm_calls`` bounds) and the calls its val
    rollouts made on average (restated answers included)."""

    kind: ClassVar[str] = "graph.candidate_cost"
    candidate_id: str
    llm_calls: int
    llm_calls_per_example: float
    score: float

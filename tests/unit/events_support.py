"""Typed access to the events of committed search steps (no tests here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from emery.algorithms import StepRecord
from emery.core.events import BestUpdated, Payload

P = TypeVar("P", bound=Payload)


def payloads(records: Sequence[StepRecord], model: type[P]) -> list[P]:
    """The payloads of every ``model`` event the steps emitted, in order."""
    return [e.payload_as(model) for r in records for e in r.events if e.kind == model.kind]


def assert_best_updates_follow_the_state(records: Sequence[StepRecord]) -> None:
    """Every step that changed the best candidate by val emitted ``best_updated`` saying so
    (the seed's first score included), and no other step did."""
    best: tuple[str, float | None] = ("", None)
    for number, record in enumerate(records):
        state = record.state
        now = (state.best_candidate_id, state.best_val_score)
        updates = payloads([record], BestUpdated)
        if state.best_candidate_id and now != best:
            assert updates, f"step {number} changed the best to {now} without best_updated"
            assert (updates[-1].candidate_id, updates[-1].score) == now
            assert updates[0].previous_score == best[1]
        else:
            assert not updates, f"step {number} reported a best that did not change"
        best = now

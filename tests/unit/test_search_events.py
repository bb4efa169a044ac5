"""Typed event payloads: every kind has one model, emitting validates, stored data reads back."""

from __future__ import annotations

from typing import ClassVar

import pytest
from events_support import assert_best_updates_follow_the_state, payloads
from pydantic import ValidationError
from test_gepa_support import FORMAT_RULE, RULES, word_problem_context, word_problems

from emery.algorithms import build_algorithm, run_search
from emery.algorithms.gepa.events import GepaMinibatchRejected
from emery.algorithms.registry import register_builtin_payloads
from emery.algorithms.search_loop import StepRecord
from emery.core.events import (
    PAYLOADS,
    STATE_KINDS,
    BestUpdated,
    Event,
    EventKindError,
    Payload,
    StateChanged,
)
from emery.evaluation.budget import BudgetConfig
from emery.training.events import TrainLoss


def test_every_kind_has_one_model_that_names_it() -> None:
    register_builtin_payloads()
    shared = {StateChanged: STATE_KINDS, TrainLoss: ("train_loss", "val_loss")}
    for kind, model in PAYLOADS.items():
        assert kind in shared.get(model, (model.kind,))
    assert len(PAYLOADS) == len(set(PAYLOADS.values())) + sum(len(k) - 1 for k in shared.values())
    assert {"gepa.plan", "apo.plan", "mipro.plan", "baseline.plan"} <= set(PAYLOADS)


def test_an_event_is_made_from_its_payload_and_reads_back_typed() -> None:
    update = BestUpdated(candidate_id="c-1", score=0.75, previous_score=0.5)
    item = Event.of(update)
    assert item.kind == "best_updated"
    assert item.data == {"candidate_id": "c-1", "score": 0.75, "previous_score": 0.5}
    assert item.payload() == update
    assert item.payload_as(BestUpdated) == update
    with pytest.raises(EventKindError):
        item.payload_as(GepaMinibatchRejected)
    paused = Event.of(StateChanged(state="paused", reason="asked"), kind="paused")
    assert paused.payload() == StateChanged(state="paused", reason="asked")


def test_a_misspelt_or_missing_field_fails_where_the_event_is_made() -> None:
    with pytest.raises(ValidationError):
        BestUpdated(candidate_id="c-1", score=0.75, previus_score=0.5)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        BestUpdated(candidate_id="c-1")  # type: ignore[call-arg]
    changed = BestUpdated(candidate_id="c-1", score=0.75)
    changed.score = "high"  # type: ignore[assignment]
    with pytest.raises(ValidationError):
        Event.of(changed)


def test_an_unknown_kind_fails_loudly() -> None:
    class Stray(Payload):
        kind: ClassVar[str] = "stray"

    with pytest.raises(EventKindError, match="unknown event kind 'stray'"):
        Event.of(Stray())
    with pytest.raises(EventKindError, match="carries StateChanged"):
        Event.of(BestUpdated(candidate_id="c", score=1.0), kind="paused")
    with pytest.raises(EventKindError):
        Event(kind="stray", data={}).payload()


def test_data_stored_by_an_older_version_that_does_not_fit_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValidationError):
        Event(kind="best_updated", data={"score": 1}).payload()


async def _run(name: str, settings: dict[str, object]) -> list[StepRecord]:
    dataset = word_problems()
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    await run_search(build_algorithm(name, settings), ctx, on_step=keep)
    return records


async def test_baseline_reports_the_seed_and_each_better_candidate_as_best() -> None:
    solved = " ".join(["Answer the question.", FORMAT_RULE, *RULES.values()])
    records = await _run(
        "baseline", {"candidates": [{"solve": "Reply briefly."}, {"solve": solved}]}
    )
    assert_best_updates_follow_the_state(records)
    updates = payloads(records, BestUpdated)
    assert [u.previous_score for u in updates] == [None, 0.0]
    assert updates[-1].score == 1.0 > updates[0].score


async def test_gepa_reports_every_change_of_best_as_it_happens() -> None:
    records = await _run("gepa", {})
    assert_best_updates_follow_the_state(records)
    updates = payloads(records, BestUpdated)
    assert updates[0].previous_score is None
    assert updates[-1].score > updates[0].score

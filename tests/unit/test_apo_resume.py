"""A stopped APO search resumed from its last checkpoint ends exactly like an unbroken one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from test_apo_support import (
    GOOD,
    HALF,
    context,
    fenced,
    reflection_lm,
    run,
    settings,
    stored_results,
)

from emery.algorithms import StepRecord, run_search
from emery.algorithms.apo import Apo, ApoState
from emery.core.models import ChatMessage
from emery.lm import FakeLM

VARIANTS = [HALF, GOOD, "Say the number you see.", GOOD + " Be brief.", "Think hard."]


def varied_reflection() -> FakeLM:
    """Edits that depend on the request (the critique variant and the batch), not on order."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        if "what the checker said" in content:
            digits = sum(ch.isdigit() for ch in content)
            return f'- problem {digits}: "End with the line Answer: <number>."'
        return fenced(VARIANTS[sum(map(ord, content)) % len(VARIANTS)])

    return FakeLM(reply, model="fake/reflection")


def fingerprint(records: Sequence[StepRecord]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for record in records for e in record.events]


def search_settings() -> dict[str, Any]:
    return {
        "rounds": 3,
        "beam_width": 2,
        "branch_factor": 2,
        "val_batch_size": 4,
        "skip_perfect_batches": False,
        "operator_children": 2,  # operator children resume exactly too
    }


async def test_uninterrupted_run_is_reproducible() -> None:
    first, first_records = await run(
        context(varied_reflection()), Apo(settings(**search_settings()))
    )
    second, second_records = await run(
        context(varied_reflection()), Apo(settings(**search_settings()))
    )
    assert first.state == second.state
    assert fingerprint(first_records) == fingerprint(second_records)


@pytest.mark.parametrize("stop_after", [1, 2, 4, 6, 9, 13])
async def test_resume_after_k_steps_matches_an_unbroken_run(stop_after: int) -> None:
    full, full_records = await run(context(varied_reflection()), Apo(settings(**search_settings())))
    assert isinstance(full.state, ApoState)
    assert full.state.round == 3  # all rounds ran: the comparison covers whole rounds

    committed: list[int] = [0]

    def stop() -> str | None:
        return "paused" if committed[0] >= stop_after else None

    ctx = context(varied_reflection())
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)
        committed[0] += 1

    paused = await run_search(
        Apo(settings(**search_settings())), ctx, on_step=keep, should_stop=stop
    )
    assert paused.reason == "paused"
    assert len(records) == stop_after

    # A fresh process: the checkpoint (state as JSON), the stored results and the spending.
    last = records[-1]
    state = ApoState.model_validate_json(last.state.model_dump_json())
    resumed_ctx = context(
        varied_reflection(), known=stored_results(records), budget_usage=last.budget
    )
    resumed, resumed_records = await run(
        resumed_ctx, Apo(settings(**search_settings())), state=state
    )

    assert resumed.state == full.state
    assert resumed.reason == full.reason
    assert fingerprint(records + resumed_records) == fingerprint(full_records)
    assert resumed_ctx.budget.usage.metric_calls == sum(len(r.results) for r in full_records)
    assert resumed_ctx.budget.usage.proposals == full_records[-1].budget.proposals
    stored_ids = {c.id for r in records + resumed_records for c in r.candidates}
    assert stored_ids == {c.id for r in full_records for c in r.candidates}


async def test_checkpoint_holds_what_a_resume_needs() -> None:
    _, records = await run(context(reflection_lm([fenced(GOOD)])), Apo(settings(rounds=1)))
    mid = next(r.state for r in records if isinstance(r.state, ApoState) and r.state.children)
    assert isinstance(mid, ApoState)
    assert set(mid.children) <= set(mid.pool)
    assert set(mid.beam) <= set(mid.pool)
    assert mid.rng_state
    assert mid.train_cursor.order
    assert ApoState.model_validate_json(mid.model_dump_json()) == mid

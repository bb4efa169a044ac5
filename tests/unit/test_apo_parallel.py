"""APO's ``proposals_per_step``: one expansion a step reproduces the search as it was; k a
step run their critiques and edits at once and are recorded in order, and a search stopped
between steps or crashed mid-step resumes to the unbroken run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError
from test_apo_resume import search_settings, varied_reflection
from test_apo_support import context, run, settings, stored_results

from emery.algorithms import StepRecord, run_search
from emery.algorithms.apo import Apo, ApoSettings, ApoState
from emery.algorithms.apo.plan import ApoPlanInputs, make_apo_plan
from emery.core.models import ChatMessage
from emery.lm import Completion, FakeLM

# The candidates (in order) this search made, in 38 steps, before proposals_per_step.
BEFORE = [
    "0c0bc0bc643146ab",
    "3c35eb288576d553",
    "cd58892d311e2f08",
    "ead64014a3e42429",
    "b3df56402781e7fa",
    "c82a45bb20382187",
    "a8d73ee8306915e2",
    "84f1b78329a44f73",
    "09992b93252e79e4",
    "ccc8cadb7c9830fa",
    "603445c96541ac92",
    "594bdde0de5527a0",
    "93ba9eebdcf55584",
    "8caec6099993e301",
    "1fd37ba5eea41c20",
    "77e34084aa50c565",
]


def candidate_ids(records: Sequence[StepRecord]) -> list[str]:
    return [candidate.id for record in records for candidate in record.candidates]


def parallel(k: int) -> Apo:
    return Apo(settings(**search_settings(), proposals_per_step=k))


async def test_one_expansion_per_step_makes_the_same_candidates_as_before() -> None:
    assert ApoSettings().proposals_per_step == 1
    _, records = await run(context(varied_reflection()), Apo(settings(**search_settings())))
    assert candidate_ids(records) == BEFORE
    assert len(records) == 38


def test_proposals_per_step_must_be_at_least_one() -> None:
    with pytest.raises(ValidationError, match="proposals_per_step"):
        ApoSettings(proposals_per_step=0)


async def test_four_expansions_a_step_run_together_and_finish_the_search() -> None:
    outcome, records = await run(context(varied_reflection()), parallel(4))
    assert isinstance(outcome.state, ApoState)
    assert outcome.state.round == 3
    critiques = [sum(e.kind == "apo.critique" for e in record.events) for record in records]
    assert critiques[1] == 4  # round 0: 2 parents x 2 branches, one step
    expansions = [e.data["expansion"] for e in records[1].events if e.kind == "apo.critique"]
    assert expansions == [0, 1, 2, 3]  # recorded in order
    assert len(records) < 38


class CrashOnce(FakeLM):
    """``varied_reflection``, raising once on call ``n`` (a crash mid-step)."""

    def __init__(self, n: int) -> None:
        self.inner = varied_reflection()
        self.model, self.n, self.count = "fake/reflection", n, 0

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.count += 1
        if self.count == self.n:
            raise RuntimeError("crashed mid-step")
        return await self.inner.complete(messages, **params)


@pytest.mark.parametrize("cut", ["stop", "crash"])
async def test_four_a_step_resume_after_a_stop_or_a_crash_to_the_unbroken_run(cut: str) -> None:
    full, full_records = await run(context(varied_reflection()), parallel(4))
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    if cut == "stop":
        ctx = context(varied_reflection())
        await run_search(
            parallel(4),
            ctx,
            on_step=keep,
            should_stop=lambda: "paused" if len(records) >= 3 else None,
        )
    else:
        ctx = context(CrashOnce(11))  # in round 1's expansions, after their train batches
        with pytest.raises(RuntimeError, match="crashed mid-step"):
            await run_search(parallel(4), ctx, on_step=keep)
        assert ctx.evaluations.prepaid
    last = records[-1]
    state = ApoState.model_validate_json(last.state.model_dump_json())
    resumed_ctx = context(
        varied_reflection(), known=stored_results(records), budget_usage=last.budget
    )
    resumed_ctx.evaluations.prepaid = dict(ctx.evaluations.prepaid)
    resumed, resumed_records = await run(resumed_ctx, parallel(4), state=state)
    assert resumed.state == full.state
    assert candidate_ids(records + resumed_records) == candidate_ids(full_records)
    assert resumed_ctx.budget.usage.metric_calls == full_records[-1].budget.metric_calls


def test_the_plan_says_how_many_expansions_a_step_runs() -> None:
    inputs = ApoPlanInputs(n_train=8, n_val=6, budget_metric_calls=None, operators=True)
    one = make_apo_plan(ApoSettings(), inputs)
    four = make_apo_plan(ApoSettings(proposals_per_step=4), inputs)
    assert one.metric_calls == four.metric_calls
    assert any(note.startswith("4 expansions") for note in four.notes)
    assert not any("expansions (and" in note for note in one.notes)

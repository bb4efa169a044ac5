"""MIPRO's proposals: repaired before they are checked, a retry round when a stage keeps
none, and the counts of kept, repaired and rejected proposals in the job's events."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from events_support import payloads
from test_mipro_support import (
    SUMMARY,
    dataset,
    format_and_demos_lm,
    make_ctx,
    run_recorded,
)

from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.events import MiproInstructionsProposed
from emery.algorithms.mipro.proposer import (
    RETRY_TEMPERATURE,
    StageGrounding,
    propose_stage,
    reason_kind,
    repaired_reply,
)
from emery.algorithms.mipro.state import InstructionChoice
from emery.algorithms.proposal_checks import name_fields, unwrap_proposal
from emery.core.models import ChatMessage
from emery.lm import FakeLM
from emery.reports.event_text import describe_event

ORIGINAL = [InstructionChoice(text="Answer the question.", source="original")]


def grounding() -> StageGrounding:
    return StageGrounding(
        stage="solve",
        reads=["question"],
        format="the reply must end with 'Answer: <number>'",
        dataset_summary="Word problems.",
        program_description="One stage.",
    )


class HeatRecorder(FakeLM):
    """A FakeLM that also records each call's temperature."""

    def __init__(self, script: Any) -> None:
        super().__init__(script)
        self.temperatures: list[float | None] = []

    async def complete(self, messages: Any, **params: Any) -> Any:
        self.temperatures.append(params.get("temperature"))
        return await super().complete(messages, **params)


async def propose(proposer: FakeLM, *, wanted: int, attempts: int) -> Any:
    return await propose_stage(
        proposer,
        grounding(),
        list(ORIGINAL),
        [],
        [],
        random.Random(0),
        wanted=wanted,
        attempts=attempts,
        use_tips=True,
        max_tokens=100,
        temperature=0.7,
    )


async def test_a_labelled_quoted_proposal_naming_an_input_field_is_repaired_and_kept() -> None:
    proposer = FakeLM(['New instruction: "Solve {question} step by step."'])

    outcome = await propose(proposer, wanted=2, attempts=1)

    assert [c.text for c in outcome.choices] == [
        "Answer the question.",
        "Solve the question step by step.",
    ]
    assert (outcome.kept, outcome.repaired, outcome.rejected, outcome.retry_calls) == (1, 1, [], 0)


@pytest.mark.parametrize(
    ("reply", "original", "kept"),
    [
        ("**Instruction:** `Read the {question} twice, then solve it.`", "Answer.", None),
        ("Instruction for stage 'solve': “Solve {question}, then check it.”", "Answer.", None),
        # the original reads {question} itself: the proposal may keep it
        ("Solve {question} carefully, step by step.", "Answer {question}.", "same"),
        # not a field the stage reads: left for the checks to reject
        ("Answer using the {context} field.", "Answer.", "same"),
    ],
)
def test_repairs_before_the_checks(reply: str, original: str, kept: str | None) -> None:
    text = repaired_reply(reply, original, ["question"])
    assert text is not None
    if kept == "same":
        assert text == reply
    else:
        assert "{" not in text
        assert "`" not in text
        assert ":" not in text
        assert "the question" in text


def test_field_names_read_as_words() -> None:
    assert name_fields("{question} comes first.", "", ["question"]) == "The question comes first."
    assert name_fields("Read each {user_note}.", "", ["user_note"]) == "Read each user note."
    assert name_fields("Use {{question}} and {other}.", "", ["question"]) == (
        "Use {{question}} and {other}."
    )
    assert unwrap_proposal("'Prompt engineering matters: solve it.'") == (
        "Prompt engineering matters: solve it."
    )


def test_rejection_reasons_are_counted_by_kind() -> None:
    assert reason_kind("near-duplicate of choice 2") == "near-duplicate"
    assert reason_kind("too short (5 characters)") == "too short"
    assert reason_kind("invented placeholder {a}, {b}") == "invented placeholder"
    assert reason_kind("echoes the proposer prompt") == "echoes the proposer prompt"


async def test_a_stage_whose_proposals_are_all_rejected_is_asked_again() -> None:
    kept = "Work through the problem one step at a time, then give the final number."

    def reply(messages: Sequence[ChatMessage]) -> str:
        return kept if "Current instruction:" in messages[-1]["content"] else "42"

    proposer = HeatRecorder(reply)

    outcome = await propose(proposer, wanted=2, attempts=2)

    assert outcome.calls == 3
    assert outcome.retry_calls == 1
    assert outcome.choices[-1].text == kept
    assert outcome.choices[-1].tip == "retry"
    assert outcome.reasons() == {"too short": 2}
    retry = proposer.calls[-1][-1]["content"]
    assert "Instructions tried so far" not in retry
    assert "Word problems." in retry
    assert proposer.temperatures == [0.7, 0.7, RETRY_TEMPERATURE]


async def test_a_stage_that_kept_a_proposal_is_not_asked_again() -> None:
    proposer = FakeLM(["Solve it step by step, then state the number.", "42", "42"])

    outcome = await propose(proposer, wanted=3, attempts=3)

    assert (outcome.calls, outcome.kept, outcome.retry_calls) == (3, 1, 0)


def proposal_script() -> FakeLM:
    """The summary, then: an answer, a labelled proposal with a placeholder, the same
    again, a good proposal."""
    replies = iter(
        [
            "42",
            'Instruction: "Solve {question} step by step."',
            'Instruction: "Solve {question} step by step."',
            "You are a careful tutor: explain each step, then give the number.",
        ]
    )

    def reply(messages: Sequence[ChatMessage]) -> str:
        prompt = messages[-1]["content"]
        if "List up to four" in prompt:
            return "- everyday arithmetic"
        if "Summarize them" in prompt:
            return SUMMARY
        return next(replies)

    return FakeLM(reply, model="fake/proposer")


async def test_the_counts_reach_the_instructions_proposed_event() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposal_script())
    settings = MiproSettings(num_instructions=4, num_trials=2, minibatch_size=5)

    outcome, records = await run_recorded(settings, ctx, stop_after=4)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.phase == "search"
    (event,) = payloads(records, MiproInstructionsProposed)
    assert (event.calls, event.kept, event.repaired, event.rejected) == (4, 2, 1, 2)
    assert event.reasons == {"too short": 1, "near-duplicate": 1}
    assert event.retry_calls == 0
    assert "Solve the question step by step." in [c.text for c in event.choices]
    assert len(state.rejected) == 2
    (stored,) = [e for r in records for e in r.events if e.kind == event.kind]
    line = describe_event(stored)
    assert "kept=2" in line
    assert "repaired=1" in line
    assert "near-duplicate" in line

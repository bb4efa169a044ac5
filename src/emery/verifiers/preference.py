"""The ``preference`` verifier: a judge model compares the output with the recorded reply.

For data without labels (a dataset built from traces keeps each call's recorded reply as
``expected``), the judge is shown the task, the recorded reply and the new answer as
answers A and B and says which is better, or that they are as good. The output scores 1
when it is preferred, 0.5 for a tie and 0 when the recorded reply is preferred. Which
answer is A is fixed per example by a hash of its id, so position bias is spread over the
dataset rather than favouring either side.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

from emery.core.models import ChatMessage, Example
from emery.verifiers.base import Verdict, as_text, clip
from emery.verifiers.judge import (
    FIELD_CHARS,
    JUDGE_SYSTEM,
    JudgeReplyError,
    JudgeVerifier,
    extract_json,
    read_text,
    render_input,
    section,
)

REPLY_SHAPE = {
    "better": "<A, B or tie>",
    "reason": "<one sentence: what makes the better answer better>",
}


def output_first(example: Example) -> bool:
    """Whether the new output is shown as answer A for this example."""
    return hashlib.sha256(example.id.encode()).digest()[0] % 2 == 0


class PreferenceJudge(JudgeVerifier):
    """Scores an output by a judge's pairwise preference against the recorded reply."""

    kind: ClassVar[str] = "preference"
    needs_expected = True

    def __init__(self, judge: Any = None, criteria: str = "") -> None:
        super().__init__(judge)
        self.criteria = criteria

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        if example.expected is None:
            return Verdict(
                score=0.0,
                feedback=f"Example {example.id} has no recorded reply to compare the answer with.",
            )
        return await super().verify(example, output, trace)

    def messages(self, example: Example, output: Any) -> list[ChatMessage]:
        answers = [as_text(output), as_text(example.expected)]
        if not output_first(example):
            answers.reverse()
        parts = [
            "Two answers to the task below. Decide which one serves the user better.",
            section("Input", render_input(example)),
            section("Answer A", clip(answers[0], FIELD_CHARS)),
            section("Answer B", clip(answers[1], FIELD_CHARS)),
        ]
        if self.criteria.strip():
            parts.append(section("What matters", self.criteria))
        parts.append(
            "Judge correctness and helpfulness, not length or style. Reply with this JSON"
            " object only:\n" + json.dumps(REPLY_SHAPE, indent=1)
        )
        return [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def read(self, example: Example, reply: str) -> Verdict:
        value = extract_json(reply)
        if not isinstance(value, dict) or "better" not in value:
            raise JudgeReplyError("the reply has no 'better' key")
        better = read_text(value["better"]).strip().strip(".").upper()
        if better not in ("A", "B", "TIE"):
            raise JudgeReplyError(f"'better' is {clip(better, 20)!r}, not A, B or tie")
        reason = read_text(value.get("reason")).rstrip(". ")
        if better == "TIE":
            score, said = 0.5, "The judge found the answer as good as the recorded reply."
        elif (better == "A") == output_first(example):
            score, said = 1.0, "The judge preferred the answer to the recorded reply."
        else:
            score, said = 0.0, "The judge preferred the recorded reply to the answer."
        return Verdict(score=score, feedback=f"{said} {reason}." if reason else said)

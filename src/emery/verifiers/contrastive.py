"""The ``contrastive`` verifier: a judge model compares the output with the gold output.

The judge lists the gold output's facts the output misses and the facts it gets wrong,
and gives a score in [0, 1]; the feedback is that list and the judge's reason.
"""

from __future__ import annotations

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
    read_score,
    read_text,
    render_input,
    section,
)

REPLY_SHAPE = {
    "missing": ["<a fact of the reference answer that the answer leaves out>"],
    "wrong": ["<a fact the answer states differently from the reference answer>"],
    "score": "<0 to 1: 1 when every fact of the reference answer is present and right>",
    "reason": "<one sentence>",
}


class ContrastiveJudge(JudgeVerifier):
    """Scores an output by how well it agrees with the gold output, per a judge model."""

    kind: ClassVar[str] = "contrastive"
    grading_question: ClassVar[str] = (
        "Does the answer state every fact of the reference answer, and state it right?"
    )
    needs_expected = True

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        if example.expected is None:
            return Verdict(
                score=0.0,
                feedback=f"Example {example.id} has no gold output to compare the answer with.",
            )
        return await super().verify(example, output, trace)

    def messages(self, example: Example, output: Any) -> list[ChatMessage]:
        parts = [
            "Compare the answer with the reference answer to the task below, fact by fact.",
            *_task(example, output),
            "List the facts of the reference answer that the answer misses and those it"
            " gets wrong (wording and extra detail do not matter), then score it. Reply"
            " with this JSON object only:\n" + json.dumps(REPLY_SHAPE, indent=1),
        ]
        return [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def grading_brief(self, example: Example, output: Any) -> str:
        """The task, the reference answer and the answer to compare."""
        return "\n\n".join(
            [
                "Compare the answer with the reference answer to the task below, fact by fact"
                " (wording and extra detail do not matter).",
                *_task(example, output),
            ]
        )

    def read(self, example: Example, reply: str) -> Verdict:
        value = extract_json(reply)
        if not isinstance(value, dict):
            raise JudgeReplyError("the reply is not a JSON object")
        if "score" not in value:
            raise JudgeReplyError("the reply has no score")
        score = read_score(value["score"])
        missing, wrong = _facts(value.get("missing")), _facts(value.get("wrong"))
        reason = read_text(value.get("reason")).rstrip(". ")
        lines = [f"Judge score {score:.2f} against the gold output."]
        if missing:
            lines.append("Missing: " + "; ".join(missing) + ".")
        if wrong:
            lines.append("Wrong: " + "; ".join(wrong) + ".")
        if not missing and not wrong:
            lines.append("No fact of the gold output is missing or wrong.")
        if reason:
            lines.append(reason + ".")
        return Verdict(score=score, feedback=" ".join(lines))


def _task(example: Example, output: Any) -> list[str]:
    return [
        section("Input", render_input(example)),
        section("Reference answer", clip(as_text(example.expected), FIELD_CHARS)),
        section("Answer", clip(as_text(output), FIELD_CHARS)),
    ]


def _facts(value: Any) -> list[str]:
    """The facts of a ``missing``/``wrong`` entry: a list of texts, or one text."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    facts = [read_text(item).rstrip(". ") for item in items]
    return [fact for fact in facts if fact and fact.lower() not in ("none", "n/a")]

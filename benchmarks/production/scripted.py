"""Scripted stand-ins for the local model (``loop.py --model fake``): the loop's logic in
seconds, with an outcome known in advance.

The task model answers a question it knows right under any instruction the writer wrote
(they say "carefully") and right for about a third of the questions otherwise; the writer
(MIPRO's proposer, GEPA's reflection) proposes such instructions; the judge scores a reply
1 when it holds the gold answer's line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from emery.core.models import ChatMessage
from emery.lm.fake import FakeLM

CAREFUL = "carefully"


def answer_line(value: float) -> str:
    """The line the seed prompt asks for: ``Answer: 12`` (``Answer: 2.5``)."""
    return f"Answer: {int(value) if float(value).is_integer() else value}"


def _digest(*texts: str) -> int:
    return int(hashlib.sha256("\x1f".join(texts).encode()).hexdigest()[:8], 16)


def task_lm(golds: Mapping[str, float]) -> FakeLM:
    """The application's (and the search's task) model."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        question = messages[-1]["content"]
        gold = golds.get(question)
        if gold is None:
            return "Answer: 0"
        right = CAREFUL in system or _digest(question) % 3 == 0
        return f"Let me add it up.\n{answer_line(gold if right else gold + 1)}"

    return FakeLM(reply, model="fake/task")


def writer_lm() -> FakeLM:
    """Proposes instructions (a variant per prompt, so proposals are not duplicates)."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        variant = _digest(*(m["content"] for m in messages)) % 10_000
        return (
            f"Read the problem {CAREFUL} and check the arithmetic (variant {variant})."
            " End with 'Answer: <number>'."
        )

    return FakeLM(reply, model="fake/writer")


def judge_lm(golds: Mapping[str, float]) -> FakeLM:
    """A rubric judge that scores one criterion, ``correct``: a JSON verdict, or Yes or No
    when asked a yes/no question (``scoring = "logprobs"``)."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        text = "\n".join(m["content"] for m in messages)
        gold = next((g for q, g in golds.items() if q in text), None)
        score = 1 if gold is not None and answer_line(gold) in text else 0
        if "Answer Yes or No" in text:
            return ("Yes" if score else "No") + "\nchecked"
        return json.dumps({"criteria": {"correct": {"score": score, "reason": "checked"}}})

    return FakeLM(reply, model="fake/judge")

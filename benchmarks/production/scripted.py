"""Scripted stand-ins for the local model (``loop.py --model fake``): the loop's logic in
seconds, with an outcome known in advance, for any application of ``apps.py``.

The task model answers a question it knows right under any instruction the writer wrote
(they say "carefully") and right for about a third of the questions otherwise, with the
application's sample replies; the writer (MIPRO's proposer, GEPA's reflection) proposes
such instructions, keeping the application's reply format; the judge scores a reply 1 when
the application's own reading finds it right against the question's gold.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from apps import Application, Gold, Question

from emery.core.models import ChatMessage
from emery.lm.fake import FakeLM

CAREFUL = "carefully"
UNKNOWN = "I do not know."
"""The task model's reply to a message that is no question it was given."""


def _digest(*texts: str) -> int:
    return int(hashlib.sha256("\x1f".join(texts).encode()).hexdigest()[:8], 16)


def task_lm(app: Application, questions: Sequence[Question]) -> FakeLM:
    """The application's (and the search's task) model."""
    replies = {app.message(q): app.sample_replies(q) for q in questions}

    def reply(messages: Sequence[ChatMessage]) -> str:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        message = messages[-1]["content"]
        if message not in replies:
            return UNKNOWN
        right, wrong = replies[message]
        return right if CAREFUL in system or _digest(message) % 3 == 0 else wrong

    return FakeLM(reply, model="fake/task")


def writer_lm(app: Application) -> FakeLM:
    """Proposes instructions (a variant per prompt, so proposals are not duplicates)."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        variant = _digest(*(m["content"] for m in messages)) % 10_000
        return (
            f"Read the input {CAREFUL} and check your work (variant {variant}). {app.reply_format}"
        )

    return FakeLM(reply, model="fake/writer")


def section(prompt: str, title: str) -> str:
    """A ``## title`` block of a judge prompt, without its heading."""
    return prompt.split(f"## {title}\n", 1)[-1].split("\n\n## ", 1)[0]


def judge_lm(app: Application, questions: Sequence[Question]) -> FakeLM:
    """A rubric judge that scores one criterion, ``correct``: a JSON verdict, or Yes or No
    when asked a yes/no question (``scoring = "logprobs"``). It finds the question by the
    prompt's input lines (``name: value``) and reads the answer as the application does."""
    golds: Mapping[frozenset[str], Gold] = {
        frozenset(f"{k}: {v}" for k, v in q.fields.items()): q.gold for q in questions
    }

    def reply(messages: Sequence[ChatMessage]) -> str:
        prompt = messages[-1]["content"]
        gold = golds.get(frozenset(section(prompt, "Input").splitlines()))
        score = 0 if gold is None else int(app.correct(section(prompt, "Answer"), gold))
        if "Answer Yes or No" in prompt:
            return ("Yes" if score else "No") + "\nchecked"
        return json.dumps({"criteria": {"correct": {"score": score, "reason": "checked"}}})

    return FakeLM(reply, model="fake/judge")

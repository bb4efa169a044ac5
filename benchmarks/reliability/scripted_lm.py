"""Scripted models for the reliability suite: for the bad-input corpus one that works and
several that are not LMs; for the kill and fault suites a deterministic task model and a
reflection model that log each call they answer.

Configs name them as ``python/scripted_lm:<name>``; this folder must be importable
(``PYTHONPATH`` in a subprocess, ``sys.path`` in the unit tests)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from emery.core.hashing import content_hash
from emery.core.models import ChatMessage
from emery.lm.base import Completion
from emery.lm.fake import FakeLM


def _answer(messages: Sequence[ChatMessage]) -> str:
    return "42"


def answer_lm() -> FakeLM:
    """A working task model: answers 42 to everything."""
    return FakeLM(_answer, model="scripted-42")


NOT_AN_LM = 5


def needs_arguments(name: str) -> FakeLM:
    """A factory that cannot be called with no arguments."""
    return FakeLM(_answer, model=name)


def broken_factory() -> FakeLM:
    """A factory that raises."""
    raise RuntimeError("the factory broke")


class SyncLM:
    """Looks like an LM but its ``complete`` is not async."""

    model = "sync"

    def complete(self, messages: Sequence[ChatMessage]) -> str:
        return "42"


SYNC_LM = SyncLM()


# --- deterministic search models for the kill and fault suites ---------------------------

CALL_LOG_ENV = "EMERY_RELIABILITY_CALL_LOG"
DELAY_ENV = "EMERY_RELIABILITY_LM_DELAY"
_GOLD: dict[str, int] = {}


def gold_answers() -> dict[str, int]:
    """Question → answer for the built-in word problems (seed 0, 40 per split)."""
    if not _GOLD:
        from emery.data.tasks import builtin_task

        data = builtin_task("word_problems").dataset(seed=0, n_train=40, n_val=40, n_test=40)
        _GOLD.update({str(e.input["question"]): int(e.expected) for e in data})  # type: ignore[arg-type]
    return _GOLD


def _instruction(messages: Sequence[ChatMessage]) -> str:
    return next((m["content"] for m in messages if m["role"] == "system"), "")


def task_reply(messages: Sequence[ChatMessage]) -> str:
    """Right or off by one, by a hash of (instruction, question): instructions differ in
    score, always the same way. A message that holds no known question gets 0."""
    last = messages[-1]["content"] if messages else ""
    found = [(q, a) for q, a in gold_answers().items() if q in last]
    if not found:
        return "Answer: 0"
    question, right = max(found, key=lambda pair: len(pair[0]))
    quality = int(content_hash([_instruction(messages), question])[:2], 16) % 4
    return f"Answer: {right if quality >= 1 else right + 1}"


def reflection_reply(messages: Sequence[ChatMessage]) -> str:
    """A fenced new instruction named after a hash of the whole prompt (reflection,
    proposer, gradient and edit prompts alike)."""
    tag = content_hash([dict(m) for m in messages])[:8]
    return f"```\nSolve the problem step by step (variant {tag}). End with 'Answer: <number>'.\n```"


class PacedLM(FakeLM):
    """A FakeLM that waits ``$EMERY_RELIABILITY_LM_DELAY`` seconds per call and appends
    one line per answered call to ``$EMERY_RELIABILITY_CALL_LOG`` (the calls paid for)."""

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        delay = float(os.environ.get(DELAY_ENV) or 0)
        if delay:
            await asyncio.sleep(delay)
        completion = await super().complete(messages, **params)
        path = os.environ.get(CALL_LOG_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as log:
                log.write(f"{self.model} {content_hash([dict(m) for m in messages])[:16]}\n")
        return completion


def task_lm() -> FakeLM:
    """The scripted task model (see ``task_reply``)."""
    return PacedLM(task_reply, model="scripted-task")


def reflection_lm() -> FakeLM:
    """The scripted reflection / proposer model (see ``reflection_reply``)."""
    return PacedLM(reflection_reply, model="scripted-reflection")


def _down(messages: Sequence[ChatMessage]) -> str:
    raise RuntimeError("the model server is down for maintenance; try again in an hour or so")


def failing_lm() -> FakeLM:
    """A task model whose every call raises."""
    return FakeLM(_down, model="scripted-down")


def _unlabeled(messages: Sequence[ChatMessage]) -> str:
    return "Let me think. The total is 12 apples, so the answer is \\boxed{12}."


def unlabeled_lm() -> FakeLM:
    """A task model that answers without the line the parser reads (``Answer: <number>``):
    each reply is unreadable, a wrong answer scored 0, never a failed run."""
    return FakeLM(_unlabeled, model="scripted-unlabeled")

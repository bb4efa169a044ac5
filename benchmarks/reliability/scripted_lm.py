"""Scripted models for the bad-input corpus: one that works and several that are not LMs.

Configs name them as ``python/scripted_lm:<name>``; this folder must be importable
(``PYTHONPATH`` in a subprocess, ``sys.path`` in the unit tests)."""

from __future__ import annotations

from collections.abc import Sequence

from emery.core.models import ChatMessage
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

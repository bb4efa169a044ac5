"""User code that ends or hangs its process (python verifiers and a ``python/`` model), for
the tests that a job survives it: ``verifier.function = "exiting_code:exits"``,
``lm.task.model = "python/exiting_code:exit_lm"``. This folder must be importable."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import Completion

RELEASE = threading.Event()
"""Set it to let every call of ``hangs`` return (a test's teardown)."""


def exits(example: Any, output: Any) -> float:
    """A verifier that calls ``sys.exit(3)``."""
    sys.exit(3)


def hangs(example: Any, output: Any) -> float:
    """A sync verifier that gives no verdict until ``RELEASE`` is set (at most 60 s)."""
    RELEASE.wait(60)
    return 1.0


class ExitLM:
    """A task model whose ``complete`` calls ``sys.exit(4)``."""

    model = "scripted-exit"

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        sys.exit(4)


exit_lm = ExitLM()

"""The verifier protocol: (example, output, trace) → a score in [0, 1] and a feedback sentence."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from emery.core.models import Example


class Verdict(BaseModel):
    """A score in [0, 1] and a sentence saying what was expected and what was wrong."""

    score: float = Field(ge=0.0, le=1.0)
    feedback: str = ""
    ranked: tuple[float, float] | None = None
    """(score, gold score) for a batch-level rank metric (``verifiers.agreement``); None for
    a verifier whose batch score is the mean of its per-example scores."""


@runtime_checkable
class Verifier(Protocol):
    """Scores one output. ``trace`` is the run's record (component calls, spans), if any."""

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict: ...


class SyncVerifier:
    """Base for verifiers that need no I/O: implement ``check``. One that compares the
    output with the example's gold output sets ``needs_expected``: a job refuses a
    dataset without any gold output for it before it calls a model."""

    needs_expected: bool = False

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        return self.check(example, output)

    def check(self, example: Example, output: Any) -> Verdict:
        raise NotImplementedError


def as_text(value: Any) -> str:
    """An output as text: strings as they are, None as empty, other values as JSON-ish str."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    import json

    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except TypeError:
        return str(value)


def clip(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters for feedback sentences."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"

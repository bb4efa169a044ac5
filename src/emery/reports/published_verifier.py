"""``[verifier] kind = "published"``: a verifier graph another job trained and published,
as this job's verifier.

The published version (``name`` and ``version``, from ``store`` or the default store) is
served whole (``reports.served``: its job's graph under the published candidate,
with its job's task model). Each output this job scores is given to it as a trace: the
example's input fields by name, ``input`` (the one input field's value, or all of them as
JSON), ``output`` (the output as text) and ``expected`` (the gold output, when the example
has one, as text); the graph's answer is read as a reward (``verifiers.agreement``: a
number, ``{"score": ..., "reason": ...}``, or text with a number) and its reason is the
feedback. A graph run that fails, or an answer with no score, is a score of 0 whose
feedback says why.

The version is named, never "the latest": it is part of the evaluation scope, so scores
stored under another version are not reused and a later ``emery publish`` changes no job's
scores.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from emery.core.errors import ConfigError
from emery.core.models import Example
from emery.lm.base import LM
from emery.reports import published
from emery.reports.served import ServedSystem
from emery.store.backends import open_store, store_file
from emery.verifiers.agreement import reward_of
from emery.verifiers.base import Verdict, as_text
from emery.verifiers.config import VerifierConfig, VerifierKind


class PublishedVerifierConfig(VerifierConfig):
    """``published``: a published verifier graph scores each output (module doc)."""

    kind: Literal["published"] = "published"
    name: str = Field(description="the published verifier graph's name (emery publish --name)")
    version: int = Field(ge=1, description="its version (emery prompts list NAME)")
    store: str | None = Field(
        default=None,
        description="the store it was published in (default: $EMERY_STORE or ./.emery/emery.db)",
    )


class PublishedVerifier:
    """A published verifier graph as a ``Verifier``."""

    def __init__(self, served: ServedSystem) -> None:
        self.served = served

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        answer = await self.served.run(trace_fields(example, output))
        label = f"{self.served.prompt.name} v{self.served.prompt.version}"
        if answer.error is not None:
            return Verdict(score=0.0, feedback=f"the verifier graph {label} failed: {answer.error}")
        try:
            return reward_of(answer.output)
        except ValueError as exc:
            return Verdict(score=0.0, feedback=f"the verifier graph {label} gave no score: {exc}")


def trace_fields(example: Example, output: Any) -> dict[str, Any]:
    """What the verifier graph reads of one scored output (module doc)."""
    fields = dict(example.input)
    values = list(example.input.values())
    fields.setdefault(
        "input", as_text(values[0]) if len(values) == 1 else json.dumps(example.input, default=str)
    )
    fields["output"] = as_text(output)
    if example.expected is not None:
        fields.setdefault("expected", as_text(example.expected))
    return fields


def build(config: PublishedVerifierConfig, judge: LM | None) -> PublishedVerifier:
    """The published version ``config`` names, served (its own task model asks)."""
    file = store_file(config.store)
    if file is not None and not file.is_file():
        raise ConfigError(
            f"verifier.store: no store at {file} (where was {config.name!r} published?)"
        )
    store = open_store(config.store)
    try:
        prompt = published.show(store, config.name, config.version)
        return PublishedVerifier(ServedSystem.of(prompt, store))
    finally:
        store.close()


KIND = VerifierKind("published", PublishedVerifierConfig, build)

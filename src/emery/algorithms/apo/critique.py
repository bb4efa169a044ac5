"""The textual gradient: ask the gradient LM what in the prompt made the runs fail."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emery.algorithms.apo.prompts import MetaPrompt
from emery.algorithms.approval import with_reviewer_notes
from emery.core.models import ChatMessage
from emery.lm.base import LM, Completion
from emery.systems.templates import placeholders


@dataclass(frozen=True)
class Sampling:
    """How critique and edit calls sample: temperature, length and an optional call seed."""

    temperature: float
    max_tokens: int
    seed: int | None = None

    def params(self) -> dict[str, Any]:
        """The keyword arguments of ``LM.complete`` (no seed when there is none)."""
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.seed is not None:
            params["seed"] = self.seed
        return params


async def ask(lm: LM, messages: list[ChatMessage], sampling: Sampling) -> Completion:
    """One request to ``lm``."""
    return await lm.complete(messages, **sampling.params())


def placeholder_list(text: str) -> str:
    """The placeholders of ``text`` as the edit prompt shows them."""
    names = sorted(placeholders(text))
    return ", ".join("{" + name + "}" for name in names) if names else "(there are none)"


def template_fields(*, prompt: str, component: str, task: str) -> dict[str, str]:
    """The fields every critique and edit prompt may use."""
    return {
        "prompt": prompt,
        "component": component,
        "task": task.strip() or "(not described)",
        "placeholders": placeholder_list(prompt),
    }


@dataclass(frozen=True)
class Critique:
    """What the gradient LM said about the prompt (``text`` is empty when it said nothing)."""

    variant: str
    text: str
    finish_reason: str


async def critique_prompt(
    lm: LM,
    template: MetaPrompt,
    *,
    prompt: str,
    component: str,
    task: str,
    experiments: str,
    sampling: Sampling,
    notes: Sequence[str] = (),
) -> Critique:
    """Ask ``lm`` for a critique of ``prompt`` given the experiments on a train batch (and
    the reasons a person rejected earlier candidates, ``notes``)."""
    messages = with_reviewer_notes(
        template.messages(
            **template_fields(prompt=prompt, component=component, task=task),
            experiments=experiments,
            critique="",
        ),
        notes,
    )
    completion = await ask(lm, messages, sampling)
    return Critique(
        variant=template.name,
        text=completion.text.strip(),
        finish_reason=completion.finish_reason,
    )

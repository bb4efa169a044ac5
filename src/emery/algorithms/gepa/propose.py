"""One component's proposal: reflective dataset → reflection call(s) → checked new text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from emery.algorithms.base import SearchContext
from emery.algorithms.gepa.checks import parse_proposal
from emery.algorithms.gepa.reflection import reflection_messages, retry_messages
from emery.algorithms.gepa.reflective_dataset import (
    approx_tokens,
    build_records,
    render_records,
)
from emery.algorithms.gepa.settings import GepaSettings
from emery.core.models import Example
from emery.evaluation.results import ExampleResult
from emery.verifiers.base import as_text


@dataclass
class Proposal:
    """What the reflection produced for one component: the new text or why there is none."""

    component: str
    text: str | None
    prompt: str
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reply(self) -> str:
        return str(self.attempts[-1]["reply"]) if self.attempts else ""

    def details(self) -> dict[str, Any]:
        """What the candidate's lineage records about its reflection."""
        return {"prompt": self.prompt, "reply": self.reply, "attempts": self.attempts}


async def propose(
    ctx: SearchContext,
    settings: GepaSettings,
    template: str,
    *,
    iteration: int,
    component: str,
    current: str,
    examples: Sequence[Example],
    results: Sequence[ExampleResult],
) -> Proposal:
    """Ask the reflection LM for a new text of ``component``; retry an unusable reply.

    Never raises for a bad reply: a proposal without text is a rejected proposal.
    """
    records = build_records(
        component,
        examples,
        results,
        excerpt_chars=settings.excerpt_chars,
        show_expected=settings.show_expected,
    )
    rendered, shown = render_records(records, settings.reflection_token_budget)
    task = ctx.dataset.description.strip() if settings.show_task else ""
    messages = reflection_messages(
        template, component=component, instruction=current, examples=rendered, task=task
    )
    prompt = messages[0]["content"]
    ctx.emit(
        "gepa.reflective_dataset",
        iteration=iteration,
        component=component,
        size=shown,
        example_ids=[record.example_id for record in records[:shown]],
        tokens=approx_tokens(prompt),
    )
    inputs = [as_text(value) for example in examples for value in example.input.values()]
    proposal = Proposal(component=component, text=None, prompt=prompt)
    lm = ctx.lm(settings.reflection_role)
    for attempt in range(1, settings.proposal_attempts + 1):
        completion = await lm.complete(
            messages,
            temperature=settings.reflection_temperature,
            max_tokens=settings.reflection_max_tokens,
        )
        text, problem = parse_proposal(
            completion.text,
            current,
            example_inputs=inputs,
            reject_copies=settings.reject_example_copies,
            max_chars=settings.max_proposal_chars,
        )
        proposal.attempts.append({"reply": completion.text, "problem": problem})
        if problem is None:
            proposal.text = text
            ctx.emit(
                "gepa.proposal",
                iteration=iteration,
                component=component,
                attempt=attempt,
                text=text,
            )
            return proposal
        ctx.emit(
            "gepa.proposal_invalid",
            iteration=iteration,
            component=component,
            attempt=attempt,
            reason=problem,
            reply=completion.text,
        )
        messages = retry_messages(messages, completion.text, problem, current)
    return proposal

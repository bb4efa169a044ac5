"""GEPA on harness code: a reflection that asks for a whole new module."""

from __future__ import annotations

from collections.abc import Sequence

from emery.algorithms.base import SearchContext
from emery.algorithms.code_proposals import (
    ask_module,
    code_messages,
    refused_messages,
)
from emery.algorithms.gepa.proposal import Proposal
from emery.algorithms.gepa.settings import GepaSettings
from emery.core.events import GepaProposal, GepaProposalInvalid
from emery.core.models import Example
from emery.evaluation.results import ExampleResult

RETRY_TEMPERATURE = 0.7


async def propose_code(
    settings: GepaSettings,
    ctx: SearchContext,
    *,
    iteration: int,
    component: str,
    current: str,
    examples: Sequence[Example],
    results: Sequence[ExampleResult],
) -> Proposal:
    """A new module for ``component``; a reply that does not compile, defines no ``run``
    or repeats the module is an invalid proposal (an event with the reason) and is asked
    again, told the reason."""
    lm = ctx.lm(settings.reflection_role)
    task = ctx.dataset.description.strip() if settings.show_task else ""
    messages = code_messages(current, examples, results, task)
    proposal = Proposal(component, text=None, prompt=messages[0]["content"], style="standard")
    asked = messages
    for attempt in range(1, settings.proposal_attempts + 1):
        temperature = None if attempt == 1 else RETRY_TEMPERATURE
        module = await ask_module(lm, asked, current, temperature=temperature)
        text, problem = module.text, module.problem
        proposal.attempts.append({"reply": module.reply, "text": text, "problem": problem})
        if text is not None:
            proposal.text = text
            ctx.emit(
                GepaProposal(iteration=iteration, component=component, attempt=attempt, text=text)
            )
            return proposal
        ctx.emit(
            GepaProposalInvalid(
                iteration=iteration,
                component=component,
                attempt=attempt,
                reason=str(problem),
                reply=module.reply,
            )
        )
        asked = refused_messages(messages, str(problem))
    return proposal

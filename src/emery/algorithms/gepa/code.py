"""GEPA on harness code: a reflection that asks for a whole new module, and the smoke run
that rejects a broken module before it costs a minibatch."""

from __future__ import annotations

from collections.abc import Sequence

from emery.algorithms.base import SearchContext
from emery.algorithms.code_proposals import (
    ask_module,
    code_messages,
    is_code_component,
    refused_messages,
    smoke_rejection,
)
from emery.algorithms.gepa.mutation import REFLECTION, Mutation
from emery.algorithms.gepa.propose import Proposal
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.gepa.state import GepaState
from emery.algorithms.sources import count
from emery.core.events import GepaMinibatchRejected, GepaProposal, GepaProposalInvalid
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


async def smoke_rejects(ctx: SearchContext, state: GepaState, mutation: Mutation) -> bool:
    """Whether a child with new code crashed, raised, exited or hung on one example of its
    minibatch (then it is rejected with the reason and never scored)."""
    if not any(is_code_component(name) for name in mutation.changed) or not mutation.batch:
        return False
    reason = await smoke_rejection(ctx, mutation.child, mutation.batch[0])
    if reason is None:
        return False
    state.counters.rejected += 1
    count(state.sources, REFLECTION, "invalid")
    ctx.emit(
        GepaMinibatchRejected(
            iteration=mutation.basis.number,
            candidate_id=mutation.child.id,
            parent_id=mutation.parent.id,
            reason=reason,
            source=mutation.source,
        )
    )
    return True

"""APO on harness code (``code:*`` components): the gradient LM critiques the module from
the parent's episodes, the edit LM writes a whole new module from that critique. A reply
that does not compile or defines no ``run`` is an invalid proposal; a new module that
crashes, raises, exits or hangs on one train example (the smoke run) is rejected before
the beam pays for scoring it. Both are edit events with the reason."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from emery.algorithms.apo.critique import Critique
from emery.algorithms.apo.edit import Edit
from emery.algorithms.apo.state import ApoState
from emery.algorithms.base import SearchContext
from emery.algorithms.code_proposals import (
    CODE_MAX_TOKENS,
    ask_module,
    code_messages,
    critique_messages,
    smoke_rejection,
)

if TYPE_CHECKING:
    from emery.algorithms.apo.propose import Expansion, Proposer

VARIANT = "code"
"""The critique and edit variant recorded for harness code (it has its own prompts)."""


async def critique_module(
    proposer: Proposer,
    ctx: SearchContext,
    state: ApoState,
    rng: random.Random,
    expansion: Expansion,
) -> Critique:
    """The gradient LM's critique of the module from the parent's episodes (reported)."""
    settings = proposer.settings
    messages = critique_messages(
        expansion.prompt,
        expansion.examples,
        expansion.result.results,
        ctx.dataset.description.strip(),
    )
    sampling = proposer.sampling(rng, settings.critique_max_tokens)
    completion = await ctx.lm(settings.gradient_role).complete(messages, **sampling.params())
    critique = Critique(VARIANT, completion.text.strip(), completion.finish_reason)
    proposer.record_critique(ctx, state, expansion, critique)
    return critique


async def edit_module(
    proposer: Proposer,
    ctx: SearchContext,
    rng: random.Random,
    expansion: Expansion,
    critique: Critique,
) -> Edit:
    """The edit LM's new module written from ``critique``, checked to compile with ``run``."""
    messages = code_messages(
        expansion.prompt,
        expansion.examples,
        expansion.result.results,
        ctx.dataset.description.strip(),
        critique.text,
    )
    sampling = proposer.sampling(rng, max(CODE_MAX_TOKENS, proposer.settings.edit_max_tokens))
    module = await ask_module(
        ctx.lm(proposer.settings.edit_role), messages, expansion.prompt, **sampling.params()
    )
    return Edit(VARIANT, module.reply, module.text, module.problem)


async def propose_module(
    proposer: Proposer,
    ctx: SearchContext,
    state: ApoState,
    rng: random.Random,
    expansion: Expansion,
) -> None:
    """Critique the module, ask for a new one, keep it only if it compiles and survives a
    smoke run on the first train example of the batch."""
    critique = await critique_module(proposer, ctx, state, rng, expansion)
    if not critique.text:
        proposer.reject(ctx, state, expansion, "the critique was empty")
        return
    edit = await edit_module(proposer, ctx, rng, expansion, critique)
    problem, child_id = edit.problem, None
    if edit.proposal is None:
        state.code_invalid += 1
    else:
        child = proposer.child(state, expansion, critique, edit.proposal, VARIANT)
        if child.id in state.beam or child.id in state.children:
            problem = f"same module as candidate {child.id} of this round"
        else:
            problem = await smoke_rejection(ctx, child, expansion.examples[0])
            if problem is None:
                child_id = proposer.keep(ctx, state, child).id
            else:
                state.smoke_rejected += 1
    proposer.record_edit(ctx, state, expansion, edit, problem, child_id)

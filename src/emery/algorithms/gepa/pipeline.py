"""Pipelined steps (``pipelined_steps``): a step's children decided while the next step's
are proposed.

At ``proposals_per_step`` k > 1 GEPA's reflective step splits in two halves: *prepare*
(draw the parents and minibatches, score the parents, reflect, score the children on their
minibatches) and *decide* (the verdicts, with the evidence rounds under the evidence rule;
the accepted children on val; the pool). A step runs the previous step's decide beside its
own prepare, so its parents come from the pool as it was before the previous step's
children joined it (a lag of one step: why k = 1 never pipelines).

The decide half waiting between two steps is ``GepaState.pending`` (``park``, ``unpark``):
its children with their minibatch results, the lanes they share and the RNG that judges
them, so a resumed search decides it as an uninterrupted one does. While both halves run
each records its events in a log of its own (``own_log``); the step stores the decide
half's, then the prepare half's (``join_logs``), whichever happened first. The decide half
adds to the pool only once the prepare half is done, so what the prepare half reads of the
pool does not depend on which rollout finishes first, and the halves overlap only while
the metric calls left hold the most both can spend, so no budget check of one depends on
what the other has spent (``Gepa._pipelined_step``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, TypeVar

from emery.algorithms.base import SearchContext, StepLog, load_rng, save_rng
from emery.algorithms.gepa.mutation import Basis, Mutation
from emery.algorithms.gepa.state import Pending, PendingChild
from emery.core.models import Example
from emery.evaluation.eval_result import EvalResult

A = TypeVar("A")
B = TypeVar("B")


def park(
    mutations: list[Mutation], afters: list[EvalResult], rng: random.Random, slots: int
) -> Pending:
    """The decide half of ``mutations`` (scored ``afters`` on their minibatches), judged
    later with ``rng`` on ``slots`` batches' lanes, as the state stores it."""
    children = []
    for mutation, after in zip(mutations, afters, strict=True):
        basis = mutation.basis
        children.append(
            PendingChild(
                parent=basis.parent.model_copy(deep=True),
                components=list(basis.components),
                number=basis.number,
                batch=[example.id for example in basis.batch],
                before=basis.before,
                shown=None if basis.shown is None else [e.id for e in basis.shown[0]],
                shown_before=None if basis.shown is None else basis.shown[1],
                child=mutation.child,
                source=mutation.source,
                changed=list(mutation.changed),
                proposals=list(mutation.proposals),
                after=after,
            )
        )
    return Pending(children=children, slots=slots, rng_state=save_rng(rng))


def unpark(
    ctx: SearchContext, pending: Pending
) -> tuple[list[Mutation], list[EvalResult], random.Random]:
    """The mutations, their minibatch results and the judging RNG ``park`` stored."""
    train = {example.id: example for example in ctx.train}

    def examples(ids: list[str]) -> list[Example]:
        return [train[example_id] for example_id in ids]

    mutations = []
    for item in pending.children:
        shown = None
        if item.shown is not None and item.shown_before is not None:
            shown = (examples(item.shown), item.shown_before)
        basis = Basis(
            item.parent, item.components, examples(item.batch), item.before, item.number, shown
        )
        mutations.append(Mutation(basis, item.child, item.source, item.changed, item.proposals))
    afters = [item.after for item in pending.children]
    return mutations, afters, load_rng(pending.rng_state, 0)


def own_log(ctx: SearchContext) -> SearchContext:
    """``ctx`` with a log of its own (the budget, evaluations and candidates shared)."""
    return replace(ctx, log=StepLog())


def join_logs(ctx: SearchContext, *parts: SearchContext) -> None:
    """The events and candidates of ``parts``' logs appended to ``ctx``'s, in that order."""
    for part in parts:
        events, candidates = part.log.drain()
        ctx.log.events.extend(events)
        for candidate in candidates:
            ctx.log.candidates.setdefault(candidate.id, candidate)


async def both(first: Coroutine[Any, Any, A], second: Coroutine[Any, Any, B]) -> tuple[A, B]:
    """Both run at once, started in order (``first`` runs up to its first wait before
    ``second`` starts); the first error cancels the other and is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            one, two = group.create_task(first), group.create_task(second)
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None
    return one.result(), two.result()

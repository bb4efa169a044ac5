"""The second stage of GEPA's ``two_stage`` acceptance: a child that passed the cheap
minibatch filter is scored on val in chunks, paired with its parent's stored val scores.

After each chunk the paired evidence is read (``algorithms.chunked_scoring``): a child
shown worse than its parent stops there (its further val examples are not paid for) and
does not join the pool; a child scored on all of val joins unless the evidence on all of
it shows it worse. The children of one step go chunk by chunk in lock step, each chunk's
evaluations sharing the step's lanes (``concurrent_scoring``).

Whether a pool member may be returned as the winner is decided apart: shown better than the
seed on val (``pool.may_win``), or, where val cannot tell them apart, by the confirmation
(``confirm_winner``, ``algorithms.winner_confirmation``): a new member whose mean val tops
the best's but is not shown better than the seed there is compared with the seed on
further train examples its lineage was never judged or reflected on, pooled with the val
pairs, and becomes the best once shown better.
"""

from __future__ import annotations

from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.chunked_scoring import ChunkedRun, score_in_chunks
from emery.algorithms.gepa.events import GepaWinnerChecked
from emery.algorithms.gepa.pool import against_seed, make_best
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.algorithms.winner_confirmation import confirm_on_train, confirmation_order
from emery.core.models import Candidate, Example
from emery.evaluation.eval_result import EvalResult


@dataclass(kw_only=True)
class OnVal(ChunkedRun):
    """One child on its way through val (``chunked_scoring``), against its parent."""

    parent: PoolEntry

    @classmethod
    def of(cls, parent: PoolEntry, child: Candidate, results: EvalResult | None = None) -> OnVal:
        return cls(candidate=child, reference=parent.val_scores, parent=parent, results=results)

    @property
    def joins(self) -> bool:
        """Scored on all of val and not shown worse than its parent there."""
        return not self.stopped and (self.evidence is None or self.evidence.verdict != "worse")

    @property
    def reason(self) -> str | None:
        """Why the child stays out of the pool (None when it joins)."""
        if self.joins or self.evidence is None:
            return None
        where = f"on {self.evidence.n} val examples" if self.stopped else "on val"
        return f"shown worse than its parent {where}: it does not join the pool"


async def score_on_val(
    ctx: SearchContext,
    children: list[tuple[PoolEntry, Candidate]],
    *,
    confidence: float,
    slots: int,
) -> list[OnVal]:
    """Each child scored on val chunk by chunk (module doc), in the order given."""
    items = [OnVal.of(parent, child) for parent, child in children]
    await score_in_chunks(ctx, items, ctx.val, "val", confidence=confidence, slots=slots)
    return items


async def confirm_winner(
    ctx: SearchContext,
    state: GepaState,
    entry: PoolEntry,
    *,
    examples: int,
    iteration: int,
    reserve: int = 0,
) -> bool:
    """Whether ``entry`` (a new pool member whose mean val tops the best's, not shown better
    than the seed on val) is shown better than the seed once its val pairs are joined by
    up to ``examples`` further train pairs (``winner_confirmation``); if so it becomes the
    best. A chunk is scored only while the budget pays it and ``reserve`` more. Reports the
    last evidence (``gepa.winner_checked``) when any train example was scored."""
    confidence = state.winner_confidence
    mine, seeds = against_seed(state, entry)
    if confidence is None or examples <= 0 or not mine:
        return False
    candidate = ctx.candidates.get(entry.id, entry.candidate)
    seed = ctx.candidates[state.seed_candidate_id]
    found = await confirm_on_train(
        ctx,
        candidate,
        seed,
        (mine, seeds),
        fresh_train(ctx, candidate, seed)[:examples],
        confidence=confidence,
        reserve=reserve,
    )
    if found.train_examples:
        ctx.emit(
            GepaWinnerChecked(
                iteration=iteration,
                candidate_id=entry.id,
                train_examples=found.train_examples,
                evidence=found.evidence,
                shown_better=found.shown_better,
            )
        )
    if not found.shown_better:
        return False
    make_best(ctx, state, entry)
    return True


def fresh_train(ctx: SearchContext, candidate: Candidate, seed: Candidate) -> list[Example]:
    """Train examples neither ``candidate`` nor any of its ancestors was judged or reflected
    on (their lineage's minibatches), in the confirmation's order (``confirmation_order``)."""
    seen: set[str] = set()
    visited: set[str] = set()
    todo = [candidate.id]
    while todo:
        ancestor = ctx.candidates.get(todo.pop())
        if ancestor is None or ancestor.id in visited:
            continue
        visited.add(ancestor.id)
        details = ancestor.lineage.details
        seen.update(details.get("minibatch", []), details.get("minibatch_shown", []))
        todo.extend(ancestor.lineage.parents)
    fresh = [example for example in ctx.train if example.id not in seen]
    return confirmation_order(ctx, candidate, seed, fresh)

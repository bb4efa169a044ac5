"""MIPRO's winner: never a combination the evidence cannot show better than the seed.

A combination scored on all of val becomes the best (the winner, if the search ends there)
when its mean val tops the best's and it is shown better than the seed: on val alone at
``VAL_ALONE_CONFIDENCE`` (0.95), or on val and at least one chunk of train examples at
``WINNER_CONFIDENCE`` (0.6, ``algorithms.winner_confirmation``, the level of GEPA's
``two_stage`` guard), each time by the paired interval and, for 0/1 scores, the exact sign
test on the pairs that disagree (``sign_test_passes``: two wins and no loss are not
enough). A higher mean alone is not enough: on 20-56 val examples a candidate one or two
answers ahead is as often luck as not (the rule before made one of 33.3% against the seed's
30.0% on 30 val examples the winner, which scored 19% against 25% on test; on the mock tasks
a quarter to a half of its winners scored below their seed). One whose mean tops the best's
but that val alone cannot show better is a contender: once the designed trials
(``mipro.screening``) are scored, after each step (and again at the end, if the calls did
not allow it then), contenders are compared with the seed on val and up to
``winner_examples`` further train examples that neither shows as a demo
(``mipro.winner_checked``), highest mean first, and the first shown better becomes the
best. Waiting for the designed round keeps a first contender's confirmation from taking
the calls of the designed trials after it. The trials' clear losers stop early
(``trials.score_stopping_losers``), which pays for it.

The reference is the seed, not the best so far: against the best so far, a lucky early
best held off the nearest-demos combination that scored one more val answer and 30 more
test points (CLINC15). Scores ranked over a whole batch have no per-example pairs: there
the higher mean wins, as it did before.
"""

from __future__ import annotations

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro.events import MiproWinnerChecked
from emery.algorithms.mipro.state import ComboRecord, MiproState
from emery.algorithms.winner_confirmation import (
    Guard,
    confirm_on_train,
    confirmation_order,
    sign_test_passes,
)
from emery.core.events import BestUpdated
from emery.core.models import Candidate, Example
from emery.systems.prompt_layout import StageLayout


def val_pairs(
    ctx: SearchContext, candidate: Candidate, reference: Candidate
) -> tuple[list[float], list[float]] | None:
    """The two candidates' scores on the val examples both are scored on; None when a
    result is ranked over its batch (no per-example score) or none is shared."""
    mine: list[float] = []
    theirs: list[float] = []
    for example in ctx.val:
        a = ctx.evaluations.cached(candidate, example, "val")
        b = ctx.evaluations.cached(reference, example, "val")
        if a is None or b is None:
            continue
        if a.ranked is not None or b.ranked is not None:
            return None
        mine.append(a.score)
        theirs.append(b.score)
    return (mine, theirs) if mine else None


VAL_ALONE_CONFIDENCE = 0.95
"""The two-sided confidence at which val alone may show a combination better than the seed.
At ``WINNER_CONFIDENCE`` (0.6) two answers of 40 ahead with none behind pass, and on CLINC15
such a winner scored -10.0 [-15.7, -4.1] points against its seed on test; below this level
a combination is confirmed on train (at least one chunk) at ``WINNER_CONFIDENCE``."""


def known(ctx: SearchContext, candidate_id: str) -> Candidate | None:
    """The candidate ``candidate_id`` names: the seed, or one this run added."""
    if candidate_id == ctx.seed_candidate.id:
        return ctx.seed_candidate
    return ctx.candidates.get(candidate_id)


def on_val(
    ctx: SearchContext, candidate: Candidate, confidence: float, guard: Guard
) -> bool | None:
    """Whether val shows ``candidate`` better than the seed by ``guard`` at ``confidence``
    (None without per-example pairs)."""
    pairs = val_pairs(ctx, candidate, ctx.seed_candidate)
    return None if pairs is None else guard(*pairs, confidence)


def make_best(ctx: SearchContext, state: MiproState, candidate_id: str, score: float) -> None:
    """Make ``candidate_id`` (val mean ``score``) the best so far and report it."""
    previous = state.best_val_score
    state.best_candidate_id, state.best_val_score = candidate_id, score
    if state.baseline_val_score is not None:
        state.lift = score - state.baseline_val_score
    ctx.emit(BestUpdated(candidate_id=candidate_id, score=score, previous_score=previous))


def shown_better(
    ctx: SearchContext,
    state: MiproState,
    candidate_id: str,
    score: float,
    confidence: float = VAL_ALONE_CONFIDENCE,
    guard: Guard = sign_test_passes,
) -> bool:
    """Whether ``candidate_id`` (val mean ``score``) may replace the best so far on val
    alone: it tops the best's mean and ``guard`` shows it better than the seed on val at
    ``confidence`` (or there is no best yet, or no per-example pairs and the higher mean
    decides). An earlier job's program, which its own search confirmed, passes on the
    interval at ``WINNER_CONFIDENCE`` (``mipro.warm``)."""
    best, previous = state.best_candidate_id, state.best_val_score
    if best is None or previous is None:
        return True
    if score <= previous:
        return False
    candidate = known(ctx, candidate_id)
    if candidate is None:
        return True
    shown = on_val(ctx, candidate, confidence, guard)
    return shown is None or shown


def contenders(state: MiproState) -> list[ComboRecord]:
    """Combinations scored on all of val whose mean tops the best's (not shown better than
    the seed on val) and not yet checked, the highest first."""
    best = state.best_val_score
    if best is None:
        return []
    found = [
        combo
        for combo in state.combos.values()
        if combo.full_score is not None
        and combo.full_score > best
        and combo.candidate_id != state.best_candidate_id
        and not combo.checked
    ]
    return sorted(found, key=lambda combo: -(combo.full_score or 0.0))


async def confirm_contenders(
    ctx: SearchContext, state: MiproState, number: int, *, examples: int, reserve: int = 0
) -> ComboRecord | None:
    """Each contender not yet checked, highest mean val first and while it still tops the
    best, compared with the seed on val and up to ``examples`` further train examples while
    the budget pays a chunk and ``reserve`` more (module doc); the first shown better
    becomes the best and is returned. A contender is checked once its confirmation scored a
    chunk or found it behind."""
    if examples <= 0:
        return None
    for combo in contenders(state):
        best_score, score = state.best_val_score, combo.full_score
        if best_score is None or score is None or score <= best_score:
            continue
        candidate, seed = known(ctx, combo.candidate_id), ctx.seed_candidate
        pairs = None if candidate is None else val_pairs(ctx, candidate, seed)
        if candidate is None or pairs is None:
            continue
        found = await confirm_on_train(
            ctx,
            candidate,
            seed,
            pairs,
            fresh_train(ctx, candidate, seed)[:examples],
            reserve=reserve,
            guard=sign_test_passes,
        )
        combo.checked = found.train_examples > 0 or found.evidence.difference < 0
        if found.train_examples:
            ctx.emit(
                MiproWinnerChecked(
                    trial=number,
                    candidate_id=candidate.id,
                    train_examples=found.train_examples,
                    evidence=found.evidence,
                    shown_better=found.shown_better,
                )
            )
        if found.shown_better:
            make_best(ctx, state, candidate.id, score)
            return combo
    return None


def fresh_train(ctx: SearchContext, candidate: Candidate, seed: Candidate) -> list[Example]:
    """Train examples neither ``candidate`` nor the seed shows as a demo (a stage showing
    the nearest few of a pool never shows an input its own demo, so its pool stays), in the
    confirmation's order (``confirmation_order``)."""
    shown = {
        demo.example_id
        for who in (candidate, seed)
        for stage, demos in who.demos.items()
        if StageLayout.of(who.components, stage).select != "nearest"
        for demo in demos
        if demo.example_id is not None
    }
    fresh = [example for example in ctx.train if example.id not in shown]
    return confirmation_order(ctx, candidate, seed, fresh)

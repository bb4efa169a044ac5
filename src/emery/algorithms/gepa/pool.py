"""Adding val-scored candidates to the pool: fronts, best and their events."""

from __future__ import annotations

from emery.algorithms.base import SearchContext
from emery.algorithms.evidence import paired
from emery.algorithms.gepa.events import GepaValEvaluated
from emery.algorithms.gepa.pareto import front_weights, per_example_front
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.core.events import BestUpdated, FrontierUpdated
from emery.core.models import Candidate
from emery.evaluation.eval_result import EvalResult


def lean(candidate: Candidate) -> Candidate:
    """``candidate`` without lineage details (same id: details are not part of it)."""
    if not candidate.lineage.details:
        return candidate
    return candidate.model_copy(
        update={"lineage": candidate.lineage.model_copy(update={"details": {}})}
    )


def restore_candidates(ctx: SearchContext, state: GepaState) -> None:
    """Make the pool's candidates known to a context rebuilt for a resumed job."""
    for item in state.pool:
        ctx.candidates.setdefault(item.id, item.candidate)


def add_to_pool(
    ctx: SearchContext, state: GepaState, entry: PoolEntry, result: EvalResult
) -> PoolEntry:
    """Store ``entry`` with its val scores from ``result``; update the fronts and the best."""
    entry.val_scores = {r.example_id: r.score for r in result.results}
    entry.val_score = result.mean
    calls = [r.lm_calls for r in result.results]
    entry.llm_calls = sum(calls) / len(calls) if calls else None
    entry.candidate = lean(entry.candidate)
    state.pool.append(entry)
    ctx.emit(
        GepaValEvaluated(
            iteration=entry.iteration,
            candidate_id=entry.id,
            score=entry.val_score,
            n=len(result.results),
        )
    )
    refresh_front(ctx, state)
    if tops_best(state, entry) and may_win(state, entry, result):
        make_best(ctx, state, entry)
    return entry


def tops_best(state: GepaState, entry: PoolEntry) -> bool:
    """Whether ``entry``'s mean val is above the best's (or there is no best yet)."""
    return state.best_val_score is None or entry.val_score > state.best_val_score


def make_best(ctx: SearchContext, state: GepaState, entry: PoolEntry) -> None:
    """Make ``entry`` the search's best and report it."""
    previous = state.best_val_score
    state.best_candidate_id, state.best_val_score = entry.id, entry.val_score
    ctx.emit(BestUpdated(candidate_id=entry.id, score=entry.val_score, previous_score=previous))


def may_win(state: GepaState, entry: PoolEntry, result: EvalResult) -> bool:
    """Whether ``entry`` may be returned as the winner: always, unless the search guards
    its winner (``state.winner_confidence``, GEPA's ``two_stage`` acceptance); then only
    when the paired evidence on val shows it better than the seed (where it does not, the
    confirmation on train may still, ``val_gate.confirm_winner``). A val ``result`` scored
    as a whole batch (a rank metric) has no per-example pairs: there the best mean wins,
    as under the evidence rule."""
    if state.winner_confidence is None or entry.id == state.seed_candidate_id or result.ranked:
        return True
    mine, seeds = against_seed(state, entry)
    return bool(mine) and paired(mine, seeds, state.winner_confidence).verdict == "better"


def against_seed(state: GepaState, entry: PoolEntry) -> tuple[list[float], list[float]]:
    """``entry``'s val scores and the seed's, on the val examples both are scored on."""
    seed = state.entry(state.seed_candidate_id)
    shared = [key for key in entry.val_scores if key in seed.val_scores]
    return [entry.val_scores[key] for key in shared], [seed.val_scores[key] for key in shared]


def adopt(ctx: SearchContext, state: GepaState, candidate: Candidate, result: EvalResult) -> None:
    """Take a candidate made outside the search (a person's edit, ``[job] approve``) into
    the pool with its val scores, as an accepted child is."""
    if state.has(candidate.id):
        return
    parents = list(candidate.lineage.parents)
    base = ctx.candidates.get(parents[0]) if parents else None
    changed = sorted(
        name
        for name, text in candidate.components.items()
        if base is None or base.components.get(name) != text
    )
    entry = PoolEntry(
        candidate=candidate,
        parents=parents,
        iteration=state.iteration,
        operation=candidate.lineage.operation,
        components_changed=changed,
    )
    add_to_pool(ctx, state, entry, result)


def refresh_front(ctx: SearchContext, state: GepaState) -> None:
    """Recompute the per-example front from the pool's val scores and report it."""
    state.front = per_example_front(state.val_table(), [item.id for item in state.pool])
    weights = front_weights(state.front, state.means())
    best = max(state.pool, key=lambda item: item.val_score)
    ctx.emit(
        FrontierUpdated(size=len(weights), best_candidate_id=best.id, best_score=best.val_score)
    )

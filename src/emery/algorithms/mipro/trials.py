"""MIPRO's search phase: trials in steps (one by default), with promotion of the best to
full val.

Every trial scores its combination on the same val minibatch, the first examples of a
fixed shuffle of val (``race_order``), so trials compare paired. A promotion races the best
pending combinations (by minibatch mean) and the best so far on a growing prefix of that
shuffle (``algorithms.evidence.race``): a combination the evidence shows worse than the
leader is dropped, and only the leader, when it is not the best so far, is scored on full
val. The best so far (the seed at first) is in every race, and its full-val scores are free.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence

from emery.algorithms.base import SearchContext
from emery.algorithms.chunked_scoring import ChunkedRun, score_in_chunks
from emery.algorithms.evidence import ContextScorer, Evidence, flipped, race
from emery.algorithms.mipro.events import MiproFullEvaluation, MiproRace, MiproTrial
from emery.algorithms.mipro.screening import designed_trials
from emery.algorithms.mipro.search import next_params, top_combos, trial_cost
from emery.algorithms.mipro.state import (
    ComboRecord,
    DemoSet,
    LayoutChoice,
    MiproState,
    TrialRecord,
)
from emery.algorithms.mipro.winner import confirm_contenders, known, make_best, shown_better
from emery.algorithms.mipro.winner_variants import restate_best, trim_best
from emery.algorithms.sources import count, report_if_changed, snapshot
from emery.core.models import Candidate, Demo, Example, Lineage
from emery.evaluation.eval_result import EvalResult
from emery.systems.prompt_layout import with_layout

log = logging.getLogger(__name__)

STOP_CONFIDENCE = 0.8
"""Two-sided confidence at which a trial shown worse than the best so far stops early (as
GEPA's children stop on val): a stopped trial only decides what is not scored further."""


async def run_trial(
    ctx: SearchContext,
    state: MiproState,
    rng: random.Random,
    *,
    top_k: int,
    final_promotions: int = 3,
    trials_per_step: int = 1,
    winner_examples: int = 0,
) -> None:
    """One search step: TPE picks the choices of up to ``trials_per_step`` trials, each a
    candidate no trial has scored, a val minibatch scores them (together); every K trials
    the best pending combination is raced and scored on full val, and at the end (the
    planned trials done, or no untried combination left) the best few are. A step is all
    its trials or none: a step killed midway is repeated whole on resume.

    The planned trials are a floor: while the metric-call budget holds another trial and
    the final full-val scoring, and untried combinations remain, trials go on."""
    plan = state.resolved_plan()
    first = state.trials_done + 1
    minibatch = min(plan.minibatch_size, len(ctx.val))
    whole = minibatch >= len(ctx.val)
    reserve = final_reserve(ctx, minibatch)
    remaining = ctx.budget.remaining_metric_calls()
    if remaining is not None and remaining < minibatch + reserve:
        await promote(ctx, state, first - 1, final=True, top_k=top_k)
        await finish(ctx, state, first - 1, winner_examples=winner_examples)
        state.done_reason = "budget reserved for the final full evaluation"
        return
    if remaining is None:  # no budget: the planned trials, then the end
        size = min(trials_per_step, max(1, plan.num_trials - first + 1))
    else:  # the trials the budget pays beside the final reserve
        size = min(trials_per_step, (remaining - reserve) // max(1, minibatch))
    before = snapshot(state.sources)
    scored = await _score_trials(ctx, state, rng, first, size, minibatch)
    number = first + len(scored) - 1
    if whole:
        for trial, (combo, score, stopped) in enumerate(scored, first):
            if not stopped:
                record_full(ctx, state, combo, score, trial)
    exhausted = len(scored) < size  # no untried combination is left
    last = exhausted or (
        number >= plan.num_trials and not more_trials_affordable(ctx, state, minibatch)
    )
    if last:
        for _ in range(final_promotions):  # another race only after one promoted
            if not await promote(ctx, state, number, final=True, top_k=top_k):
                break
        await finish(ctx, state, number, winner_examples=winner_examples)
        state.done_reason = (
            f"{number} trials done, every combination tried"
            if exhausted
            else f"{number} trials done"
        )
    else:
        if number // plan.full_eval_every > (first - 1) // plan.full_eval_every:
            await promote(ctx, state, number, final=False, top_k=top_k)
        if not designed_trials(state, _identifier(ctx, state, first)):
            await _confirm(ctx, state, number, winner_examples, reserve)
    state.top = top_combos(state, top_k)
    report_if_changed(ctx, "mipro", number, before, state.sources)


async def _score_trials(
    ctx: SearchContext,
    state: MiproState,
    rng: random.Random,
    first: int,
    size: int,
    minibatch: int,
) -> list[tuple[ComboRecord, float, bool]]:
    """TPE's next ``size`` choices as candidates no trial has scored (fewer when fewer are
    left; the designed trials of ``mipro.screening`` first), scored together
    on the same val minibatch (all of val when the minibatch is that big); records each
    trial and its combination in trial order."""
    whole = minibatch >= len(ctx.val)

    identify = _identifier(ctx, state, first)
    choices = next_params(
        state.spaces(),
        state.trials,
        seed=rng.randrange(2**31),
        startup_trials=state.resolved_plan().tpe_startup_trials,
        count=size,
        rule=ctx.select,
        identify=identify,
        designed=designed_trials(state, identify),
    )
    candidates = [
        ctx.add_candidate(combo_candidate(ctx, state, params, number))
        for number, params in enumerate(choices, first)
    ]
    batch = list(ctx.val) if whole else race_order(ctx)[:minibatch]
    results = await score_stopping_losers(ctx, state, candidates, batch)
    scored = []
    for number, params, candidate, (result, stopped) in zip(
        range(first, first + len(choices)), choices, candidates, results, strict=True
    ):
        state.trials_done = number
        state.trials.append(
            TrialRecord(
                number=number,
                kind="full" if whole and not stopped else "minibatch",
                params=params,
                candidate_id=candidate.id,
                score=result.mean,
                n=len(result.results),
                cost=trial_cost(ctx.select, result.results),
            )
        )
        combo = state.combos.setdefault(
            candidate.id, ComboRecord(candidate_id=candidate.id, params=params)
        )
        combo.minibatch_scores.append(result.mean)
        combo.minibatch_n += len(result.results)
        combo.dropped = combo.dropped or stopped
        for source in combo_sources(state, params):
            count(state.sources, source, "proposed")
        ctx.emit(
            MiproTrial(
                number=number,
                params=params,
                candidate_id=candidate.id,
                score=result.mean,
                n=len(result.results),
                full=whole and not stopped,
                stopped=stopped,
            )
        )
        scored.append((combo, result.mean, stopped))
    return scored


def _identifier(
    ctx: SearchContext, state: MiproState, number: int
) -> Callable[[Mapping[str, int]], str]:
    """The id of the candidate a trial (numbered ``number``) of given params scores."""
    return lambda params: combo_candidate(ctx, state, dict(params), number).id


async def score_stopping_losers(
    ctx: SearchContext, state: MiproState, candidates: Sequence[Candidate], batch: list[Example]
) -> list[tuple[EvalResult, bool]]:
    """Each candidate's results on ``batch`` and whether it stopped early: scored
    ``chunked_scoring.CHUNK`` examples at a time against the best so far (scored on all of
    val), a candidate shown worse at ``STOP_CONFIDENCE`` is not scored further."""
    best = known(ctx, state.best_candidate_id) if state.best_candidate_id else None
    reference: dict[str, float] = {}
    for example in batch:
        result = None if best is None else ctx.evaluations.cached(best, example, "val")
        if result is not None:
            reference[example.id] = result.score
    runs = [ChunkedRun(candidate, reference) for candidate in candidates]
    await score_in_chunks(ctx, runs, batch, "val", confidence=STOP_CONFIDENCE)
    return [
        (
            run.results or EvalResult(candidate_id=run.candidate.id, split="val", results=[]),
            run.stopped,
        )
        for run in runs
    ]


async def finish(
    ctx: SearchContext, state: MiproState, number: int, *, winner_examples: int
) -> None:
    """The last steps once the trials are done: a combination that tops the best on val
    but is not shown better there is confirmed on train with the calls left
    (``mipro.winner``), then the winner's variants (``winner_variants``)."""
    await _confirm(ctx, state, number, winner_examples, 0)
    await restate_best(ctx, state, number)
    await trim_best(ctx, state, number)
    state.done = True


async def _confirm(
    ctx: SearchContext, state: MiproState, number: int, examples: int, reserve: int
) -> None:
    combo = await confirm_contenders(ctx, state, number, examples=examples, reserve=reserve)
    if combo is not None:
        for source in combo_sources(state, combo.params):
            count(state.sources, source, "accepted")


def more_trials_affordable(ctx: SearchContext, state: MiproState, minibatch: int) -> bool:
    """Whether a budget is set, holds one more trial and what the final promotion needs,
    and the space has combinations no trial has tried.

    The final promotion needs the rest of val for the race's leader (nothing when trials
    are judged on all of val): the race itself stops growing its prefix when only that
    reserve is left, so reserving every racer's worst case would leave calls unspent."""
    remaining = ctx.budget.remaining_metric_calls()
    if remaining is None:
        return False
    space = math.prod(state.spaces().values())
    reserve = final_reserve(ctx, minibatch)
    return len(state.combos) < space and remaining >= minibatch + reserve


def final_reserve(ctx: SearchContext, minibatch: int) -> int:
    """The metric calls kept for scoring the final race's leader on the rest of val."""
    return max(0, len(ctx.val) - minibatch)


def race_order(ctx: SearchContext) -> list[Example]:
    """Val in a fixed shuffle (from the job's seed): trials are scored on its first
    examples, races on growing prefixes of it, so every comparison is paired."""
    order = list(ctx.val)
    random.Random(f"mipro-race:{ctx.seed}").shuffle(order)
    return order


def pending_combos(state: MiproState, limit: int) -> list[ComboRecord]:
    """Up to ``limit`` combinations with a minibatch score, not yet on full val and not
    dropped by a race, best minibatch mean first."""
    pending = [
        combo
        for combo in state.combos.values()
        if combo.full_score is None and combo.minibatch_scores and not combo.dropped
    ]
    return sorted(pending, key=lambda combo: -(combo.minibatch_mean or 0.0))[:limit]


def _incumbent(ctx: SearchContext, state: MiproState, number: int) -> Candidate | None:
    best = state.best_candidate_id
    if best is None:
        return None
    candidate = known(ctx, best)
    if candidate is not None:
        return candidate
    combo = state.combos.get(best)
    return None if combo is None else combo_candidate(ctx, state, combo.params, number)


async def promote(
    ctx: SearchContext, state: MiproState, number: int, *, final: bool, top_k: int
) -> bool:
    """Race the ``top_k`` best pending combinations against the best so far; score the
    race's leader on full val if it is not the best so far (and the budget allows).
    Returns whether a combination was scored on full val."""
    pending = pending_combos(state, top_k)
    incumbent = _incumbent(ctx, state, number)
    if not pending or incumbent is None:
        return False
    candidates = {incumbent.id: incumbent}
    combos = {}
    for combo in pending:
        candidate = ctx.add_candidate(combo_candidate(ctx, state, combo.params, number))
        candidates[candidate.id], combos[candidate.id] = candidate, combo
    order = race_order(ctx)
    minibatch = min(state.resolved_plan().minibatch_size, len(order))
    paid = ctx.budget.usage.metric_calls
    # keep the calls that score the leader on the rest of val
    scorer = ContextScorer(ctx, candidates, order, "val", reserve=len(order) - minibatch)
    result = await race(list(candidates), [e.id for e in order], scorer, start=minibatch)
    for candidate_id, combo in combos.items():
        combo.evidence = result.evidence.get(candidate_id)
        combo.dropped = candidate_id in result.dropped
    leader = result.leader if result.leader in combos else None
    ctx.emit(
        MiproRace(
            trial=number,
            racers=list(candidates),
            incumbent=incumbent.id,
            n=result.n,
            rounds=result.rounds,
            leader=result.leader,
            survivors=result.survivors,
            dropped=list(result.dropped),
            evidence=result.evidence,
            metric_calls=ctx.budget.usage.metric_calls - paid,
            promoted=leader,
            final=final,
        )
    )
    if leader is None:
        return False
    against = result.evidence.get(incumbent.id)
    evidence = None if against is None else flipped(against)
    return await _score_full(
        ctx, state, combos[leader], candidates[leader], number, final, evidence
    )


async def _score_full(
    ctx: SearchContext,
    state: MiproState,
    combo: ComboRecord,
    candidate: Candidate,
    number: int,
    final: bool,
    evidence: Evidence | None,
) -> bool:
    missing = sum(1 for e in ctx.val if ctx.evaluations.cached(candidate, e, "val") is None)
    if not ctx.budget.can_afford(missing):
        log.info("mipro: no budget left to score %s on full val", candidate.id)
        return False
    result = await ctx.evaluate(candidate, ctx.val, "val")
    state.trials.append(
        TrialRecord(
            number=number,
            kind="full",
            params=combo.params,
            candidate_id=candidate.id,
            score=result.mean,
            n=len(result.results),
            cost=trial_cost(ctx.select, result.results),
        )
    )
    record_full(ctx, state, combo, result.mean, number, final=final, evidence=evidence)
    return True


def record_full(
    ctx: SearchContext,
    state: MiproState,
    combo: ComboRecord,
    score: float,
    number: int,
    *,
    final: bool = False,
    evidence: Evidence | None = None,
) -> None:
    combo.full_score = score
    improved = shown_better(ctx, state, combo.candidate_id, score)
    if improved:
        make_best(ctx, state, combo.candidate_id, score)
        for source in combo_sources(state, combo.params):
            count(state.sources, source, "accepted")
    ctx.emit(
        MiproFullEvaluation(
            trial=number,
            candidate_id=combo.candidate_id,
            params=combo.params,
            score=score,
            minibatch_mean=combo.minibatch_mean,
            n=len(ctx.val),
            best=improved,
            final=final,
            evidence=evidence,
        )
    )


def combo_sources(state: MiproState, params: dict[str, int]) -> list[str]:
    """Where a combination's choices came from, one source per stage and kind of choice
    (``instruction.proposed``, ``instruction.operator.step_by_step``, ``demos.bootstrapped``,
    ``layout.format_reminder``, ...), counted in ``state.sources``."""
    sources = []
    for stage in state.stages:
        instruction = state.instructions[stage][params.get(f"{stage}.instruction", 0)]
        kind = instruction.source + (
            f".{instruction.tip}" if instruction.source == "operator" else ""
        )
        layouts = state.layouts.get(stage) or [LayoutChoice()]
        sources += [
            f"instruction.{kind}",
            f"demos.{state.demo_sets[stage][params.get(f'{stage}.demos', 0)].kind}",
            f"layout.{layouts[params.get(f'{stage}.layout', 0)].source}",
        ]
    return sources


def combo_candidate(
    ctx: SearchContext, state: MiproState, params: dict[str, int], number: int
) -> Candidate:
    """The program a choice of indices stands for."""
    seed = ctx.seed_candidate
    components: dict[str, str] = {}
    demos: dict[str, tuple[Demo, ...]] = {}
    sources: dict[str, str] = {}
    for stage in state.stages:
        instruction = state.instructions[stage][params[f"{stage}.instruction"]]
        demo_set: DemoSet = state.demo_sets[stage][params[f"{stage}.demos"]]
        layouts = state.layouts.get(stage) or [LayoutChoice()]
        layout = layouts[params.get(f"{stage}.layout", 0)]
        select = "nearest" if demo_set.kind == "nearest" else layout.layout.select
        shape = layout.layout.model_copy(update={"select": select})
        components.update(with_layout(seed.components, stage, shape))
        components[stage] = instruction.text
        demos[stage] = tuple(demo_set.demos)
        sources[stage] = f"{instruction.source}+{demo_set.kind}+{layout.source}"
    return seed.derive(
        components=components,
        demos=demos,
        lineage=Lineage(
            parents=(seed.id,),
            generation=1,
            operation="mipro",
            iteration=number,
            details={"params": params, "choices": sources},
        ),
    )

"""MIPRO's warm start: an earlier job's programs as the best so far, choices and TPE trials.

In the first step the earlier job's programs (its combinations scored on full val, best
first) are rescored on this job's val (``algorithms.warm_start``) and kept in the state
(``state.warm``); one shown better than the seed on val at 0.6 becomes the best (its own
search confirmed it; ``mipro.winner``), so every race has it as the incumbent to beat. Once
the choices exist, each program's demos become a demo-set choice of their stage (after
bootstrapping) and its instructions an instruction choice (after proposing), source
``warm``; a program the search space can then build exactly (same instruction, demos and
layout in every stage) enters the study as a full-val trial with its rescored score, so TPE
starts from what the earlier search learned. A program the space cannot build (another
layout, a changed stage) stays a contender only as the best.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro.search import trial_cost
from emery.algorithms.mipro.state import (
    ComboRecord,
    DemoSet,
    InstructionChoice,
    MiproState,
    TrialRecord,
    WarmProgram,
)
from emery.algorithms.mipro.trials import combo_candidate
from emery.algorithms.mipro.winner import make_best, shown_better
from emery.algorithms.warm_start import rescore
from emery.algorithms.winner_confirmation import WINNER_CONFIDENCE, interval_passes
from emery.core.models import Demo

LAYOUT_TRIES = 64
"""The most layout combinations tried when matching a program to the search space."""


async def take_programs(ctx: SearchContext, state: MiproState) -> None:
    """The earlier job's programs rescored on val, kept in the state; each becomes the best
    so far when shown better than it on val (``mipro.winner``)."""
    for candidate, result in await rescore(ctx):
        state.warm.append(
            WarmProgram(
                candidate=candidate,
                score=result.mean,
                cost=trial_cost(ctx.select, result.results),
            )
        )
        if shown_better(ctx, state, candidate.id, result.mean, WINNER_CONFIDENCE, interval_passes):
            make_best(ctx, state, candidate.id, result.mean)


def add_demo_sets(state: MiproState) -> None:
    """Each warm program's demos of a stage as a demo-set choice there, unless one has them."""
    for stage in state.stages:
        sets = state.demo_sets.setdefault(stage, [])
        for program in state.warm:
            demos = list(program.candidate.demos.get(stage, ()))
            if _demo_set_index(sets, demos) is None:
                sets.append(DemoSet(kind="warm", demos=demos))


def add_choices(ctx: SearchContext, state: MiproState) -> None:
    """Each warm program's instruction of a stage as a choice there (unless one has its
    text); then each program the space builds exactly as a full-val trial (number 0)."""
    for stage in state.stages:
        choices = state.instructions.setdefault(stage, [])
        for program in state.warm:
            text = program.candidate.components.get(stage)
            if text is not None and all(choice.text != text for choice in choices):
                choices.append(InstructionChoice(text=text, source="warm"))
    for program in state.warm:
        params = _params(ctx, state, program)
        if params is None or program.candidate.id in state.combos:
            continue
        state.trials.append(
            TrialRecord(
                number=0,
                kind="full",
                params=params,
                candidate_id=program.candidate.id,
                score=program.score,
                n=len(ctx.val),
                cost=program.cost,
            )
        )
        state.combos[program.candidate.id] = ComboRecord(
            candidate_id=program.candidate.id, params=params, full_score=program.score
        )


def _params(ctx: SearchContext, state: MiproState, program: WarmProgram) -> dict[str, int] | None:
    """The choice indices that build ``program`` exactly, or None when none do."""
    candidate = program.candidate
    fixed: dict[str, int] = {}
    for stage in state.stages:
        texts = [choice.text for choice in state.instructions.get(stage, [])]
        text = candidate.components.get(stage)
        demos = _demo_set_index(state.demo_sets.get(stage, []), candidate.demos.get(stage, ()))
        if text not in texts or demos is None:
            return None
        fixed[f"{stage}.instruction"], fixed[f"{stage}.demos"] = texts.index(text), demos
    layouts = [name for name in state.spaces() if name.endswith(".layout")]
    ranges = [range(state.spaces()[name]) for name in layouts]
    for picked in itertools.islice(itertools.product(*ranges), LAYOUT_TRIES):
        params = {**fixed, **dict(zip(layouts, picked, strict=True))}
        if combo_candidate(ctx, state, params, 0).id == candidate.id:
            return params
    return None


def _demo_set_index(sets: Sequence[DemoSet], demos: Sequence[Demo]) -> int | None:
    wanted = [_demo_key(demo) for demo in demos]
    for index, demo_set in enumerate(sets):
        if [_demo_key(demo) for demo in demo_set.demos] == wanted:
            return index
    return None


def _demo_key(demo: Demo) -> str:
    """What a demo adds to a candidate's identity: its inputs and output."""
    return demo.model_dump_json(include={"inputs", "output"})

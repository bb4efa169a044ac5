"""APO with several expansions or scorings a step (``proposals_per_step``) decides the same
whatever order its rollouts finish in, and what it decided when these runs were recorded:
the same candidates, beams (with their scores and evidence), full-val scores, best
updates, round cuts, metric calls and steps. A change to how a step's work is scheduled
(benchmarks/efficiency/README.md, "A step's batches share its lanes (APO, k > 1)") must
keep both; that a step's evaluations share its k batches' lanes is tested here too."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from test_apo_resume import search_settings, varied_reflection
from test_apo_support import context, dataset, run, settings, task_reply
from timing_support import Jittery, LanesLM

from emery.algorithms import StepRecord
from emery.algorithms.apo import Apo
from emery.algorithms.base import SearchContext
from emery.core.models import ChatMessage
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM

DECISIONS = (
    "apo.round_started",
    "apo.beam_updated",
    "apo.full_val_scored",
    "apo.round_cut",
    "apo.expansion_skipped",
    "best_updated",
)

# (proposals_per_step, metric calls (None: no limit), seed) -> (fingerprint, metric calls
# spent, steps), recorded at f572725, before a step's evaluations shared its lanes, and
# again when a child that only restates took its parent's readable runs
# (``algorithms.restate_sharing``; up to 7 fewer metric calls a run).
RECORDED: list[tuple[int, int | None, int, tuple[str, int, int]]] = [
    (2, None, 0, ("31c8b7cf7e54", 114, 21)),
    (4, None, 0, ("3554f28da1b9", 114, 13)),
    (4, None, 1, ("17a9aad6ed03", 115, 14)),
    (4, 100, 0, ("848c4b6db4f9", 89, 13)),
    (2, 60, 1, ("f1ef38ce6cc3", 56, 8)),
    (3, 100, 1, ("74606e102178", 91, 16)),
    (8, None, 2, ("40ed86c00de4", 126, 11)),
    (4, 80, 2, ("1cf80d436adb", 71, 10)),
]


def fingerprint(ctx: SearchContext, outcome: Any, records: Sequence[StepRecord]) -> str:
    """What the search decided: its candidates in order, every round's val batch, beam and
    dropped members (scores, evidence), full-val score, best update and cut, in order, and
    the calls and steps."""
    ids = [candidate.id for record in records for candidate in record.candidates]
    found = [(e.kind, e.data) for record in records for e in record.events]
    decided = [item for item in found if item[0] in DECISIONS]
    spent = (ctx.budget.usage.metric_calls, outcome.state.iteration, outcome.state.beam)
    text = repr((ids, decided, *spent))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def apo(k: int) -> Apo:
    return Apo(settings(**search_settings(), proposals_per_step=k))


def pinned_context(budget: int | None, seed: int, task: Any = None) -> SearchContext:
    return context(
        varied_reflection(),
        data=dataset(16, 12),
        budget=BudgetConfig(metric_calls=budget) if budget else None,
        task=task,
        seed=seed,
        concurrency=2,
    )


async def search(ctx: SearchContext, k: int) -> tuple[str, int, int]:
    outcome, records = await run(ctx, apo(k))
    return fingerprint(ctx, outcome, records), ctx.budget.usage.metric_calls, len(records)


@pytest.mark.parametrize(("k", "budget", "seed", "expected"), RECORDED)
async def test_several_a_step_decide_what_they_decided_when_recorded(
    k: int, budget: int | None, seed: int, expected: tuple[str, int, int]
) -> None:
    assert await search(pinned_context(budget, seed), k) == expected


@pytest.mark.parametrize(("k", "budget", "seed", "expected"), RECORDED[::2])
async def test_the_decisions_do_not_depend_on_which_rollout_finishes_first(
    k: int, budget: int | None, seed: int, expected: tuple[str, int, int]
) -> None:
    for jitter in range(2):
        task = Jittery(FakeLM(task_reply, model="fake/task"), jitter)
        assert await search(pinned_context(budget, seed, task), k) == expected


def apo_split(messages: Sequence[ChatMessage]) -> str:
    number = int(str(messages[-1]["content"]).split()[-1].rstrip("."))
    return "val" if number >= 40 else "train"  # dataset(): train 10.., val 40..


async def lanes_seen(k: int) -> Counter[str]:
    task = LanesLM(FakeLM(task_reply, model="fake/task"), apo_split)
    await search(pinned_context(None, 0, task), k)  # [runtime] concurrency 2
    return task.most_at_once


async def test_a_steps_evaluations_share_its_lanes_when_fewer_are_left() -> None:
    # At k = 4 the first round's first step expands the lone seed four times: its four
    # train batches are one evaluation, which takes all 4 x 2 lanes; the contenders'
    # full-val scorings, one at a time, take them too. At k = 1 each batch keeps its 2.
    # (Two candidates with the same text count together: 4 on val before the change.)
    four, one = await lanes_seen(4), await lanes_seen(1)
    assert min(four["val"], four["train"]) >= 8
    assert max(one["val"], one["train"]) <= 2

"""An evidence round scores the parent and the child on their further examples at once,
for a lone child too (a step waits one round trip per round, not two)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

from test_gepa_evidence import LUCKY, REFLECTION_ONLY, lucky_reflection_lm, lucky_task_lm
from test_gepa_support import word_problem_context, word_problems

from emery.algorithms.gepa import Gepa
from emery.core.models import ChatMessage
from emery.evaluation.budget import BudgetConfig
from emery.lm import Completion, FakeLM


class OverlapLM:
    """``inner``'s replies, each held for a few turns of the event loop; ``most_at_once``
    is the most distinct system prompts (candidates) that had a call in flight together."""

    def __init__(self, inner: FakeLM) -> None:
        self.inner = inner
        self.model = inner.model
        self.in_flight: Counter[str] = Counter()
        self.most_at_once = 0

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        self.in_flight[system] += 1
        self.most_at_once = max(self.most_at_once, len(+self.in_flight))
        try:
            for _ in range(5):  # let every rollout started with this one start too
                await asyncio.sleep(0)
            return await self.inner.complete(messages, **params)
        finally:
            self.in_flight[system] -= 1


async def test_a_lone_childs_evidence_round_scores_parent_and_child_at_once() -> None:
    dataset = word_problems(n_train=40, n_val=10)
    task = OverlapLM(lucky_task_lm(dataset))
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=200),
        task=task,  # type: ignore[arg-type]
        reflection=lucky_reflection_lm(),
    )
    gepa = Gepa(REFLECTION_ONLY)
    state = await gepa.start(ctx)
    await gepa.step(ctx, state)

    child = next(c for c in ctx.candidates.values() if LUCKY in str(c.components))
    assert child.lineage.details["evidence"]["n"] > 5, "the child was judged on more examples"
    # Before, a lone child's round ran the parent's rollouts, then the child's: never both.
    assert task.most_at_once == 2

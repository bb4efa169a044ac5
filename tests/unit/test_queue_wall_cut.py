"""A wall-time cut withdraws the rollouts a ``runners`` job queued and no runner claimed.

The job's step waits on four rollouts in the store's queue (``QueueExecutor``); one runner
(here, in the test) claims and finishes one, and the wall time runs out on a fake clock
while the other three wait. The cut must leave none of them for a runner to claim later
(they would run for a step that was cut, and their results could be taken and charged).
"""

from __future__ import annotations

import asyncio

import pytest
from test_gepa_support import task_lm, word_problems
from test_store_queue import running_job
from walltime_support import FakeClock

from emery.core.example_result import ExampleResult
from emery.data.tasks import builtin_task
from emery.evaluation.budget import Budget, BudgetConfig, BudgetExhausted
from emery.evaluation.evaluator import Evaluator
from emery.lm.usage import UsageMeter
from emery.store import MemoryStore, RolloutFilter
from emery.store.records import RolloutEnd
from emery.systems.prompt_program import PromptProgram
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.workers.queue_executor import WITHDRAWN, QueueExecutor


async def test_a_wall_cut_withdraws_the_queued_rollouts_no_runner_claimed() -> None:
    store, clock, meter = MemoryStore(), FakeClock(), UsageMeter()
    job = running_job(store)
    data = word_problems()
    system = PromptProgram(builtin_task("word_problems").program)
    evaluator = Evaluator(
        system,
        build_verifier(VerifierConfig(kind="numeric")),
        task_lm(data),
        executor=QueueExecutor(store, job_id=job, lease_s=30.0, meter=meter, poll_s=0.002),
    )
    budget = Budget(BudgetConfig(wall_time_s=0.05), meter, clock=clock)

    async def one_runner_then_the_deadline() -> None:
        while (claimed := store.claim_rollout("runner-1", job_id=job)) is None:
            await asyncio.sleep(0.001)
        result = ExampleResult(
            candidate_id=str(claimed.candidate_id), example_id=str(claimed.example_id), score=1.0
        )
        end = RolloutEnd(
            status="succeeded",
            attempt_status="succeeded",
            output="1",
            score=1.0,
            result=result.model_dump(mode="json"),
        )
        store.finish_rollout(claimed.id, f"{claimed.id}:1", end)
        clock.advance(1.0)  # past the 0.05 s of wall time while three still wait

    with budget.step_gate():
        runner = asyncio.ensure_future(one_runner_then_the_deadline())
        batch = evaluator.evaluate(system.seed_candidate(), data.val[:4], "val", gate=budget.gate)
        with pytest.raises(BudgetExhausted, match="wall_time_s"):
            await budget.within_wall_time(batch)
        await runner

    rollouts = store.list_rollouts(RolloutFilter(job_id=job), limit=None).items
    assert sorted(r.status for r in rollouts) == ["cancelled"] * 3 + ["succeeded"]
    assert {r.error for r in rollouts if r.status == "cancelled"} == {WITHDRAWN}
    assert store.claim_rollout("runner-2", job_id=job) is None  # nothing left to run later

"""The rows a step stores for its evaluations: the evaluation (the cache entry) and a
rollout with its attempt for each, kept only where a tracer has not recorded them live."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from emery.core.example_result import ExampleResult
from emery.core.hashing import content_hash
from emery.core.rollouts import Attempt, Rollout, RolloutConfig
from emery.jobs.runtime import Runtime
from emery.store.records import EvaluationRecord


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


EvaluationRows = tuple[list[EvaluationRecord], list[Rollout], list[Attempt]]


def evaluation_rows(
    runtime: Runtime, results: Sequence[ExampleResult], *, job_id: str, owner: str
) -> EvaluationRows:
    """Evaluation rows, each with a rollout and attempt row (stored only where a tracer
    has not recorded that rollout already; ``owner``, the job's owner, ran them in its
    process and is each attempt's ``worker_id``)."""
    evaluations, rollouts, attempts = [], [], []
    finished = time.time()
    for result in results:
        split = result.split or ""
        example_hash = runtime.hashes.get((split, result.example_id), "")
        rollout_id = result.rollout_id or "ro-" + content_hash(
            [runtime.scope, result.candidate_id, result.example_id, split, example_hash], 20
        )
        rollouts.append(_rollout_row(runtime, result, rollout_id, job_id, finished))
        attempts.append(_attempt_row(result, rollout_id, owner, finished))
        evaluations.append(
            EvaluationRecord(
                scope=runtime.scope,
                example_hash=example_hash,
                job_id=job_id,
                rollout_id=rollout_id,
                result=result,
            )
        )
    return evaluations, rollouts, attempts


def _rollout_row(
    runtime: Runtime, result: ExampleResult, rollout_id: str, job_id: str, finished: float
) -> Rollout:
    """The rollout row of one result that finished at ``finished``."""
    split = result.split or ""
    config = runtime.config.runtime
    started = finished - result.latency_s
    example = runtime.example(split, result.example_id)
    return Rollout(
        id=rollout_id,
        job_id=job_id,
        candidate_id=result.candidate_id,
        example_id=result.example_id,
        split=split,
        mode=split,
        status="failed" if result.error else "succeeded",
        input=example.input if example is not None else None,
        output=result.output,
        score=result.score,
        error=result.error,
        config=RolloutConfig(max_attempts=config.max_attempts, timeout_seconds=config.timeout_s),
        attempt_count=max(1, result.attempts),
        metadata={"lm_calls": result.lm_calls},
        created_at=_at(started),
        started_at=_at(started),
        finished_at=_at(finished),
    )


def _attempt_row(result: ExampleResult, rollout_id: str, owner: str, finished: float) -> Attempt:
    """The row of the last attempt of one result's rollout."""
    tries = max(1, result.attempts)
    return Attempt(
        id=f"{rollout_id}:{tries}",
        rollout_id=rollout_id,
        number=tries,
        status="failed" if result.error else "succeeded",
        worker_id=owner,
        error=result.error,
        started_at=_at(finished - result.latency_s),
        heartbeat_at=_at(finished),
        finished_at=_at(finished),
    )

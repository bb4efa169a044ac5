"""The rows a step stores for its evaluations: the evaluation (the cache entry) and a
rollout with its attempt for each, kept only where a tracer has not recorded them live."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from emery.core.hashing import content_hash
from emery.evaluation.results import ExampleResult
from emery.jobs.runtime import Runtime
from emery.store.records import AttemptRecord, EvaluationRecord, RolloutRecord


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def evaluation_rows(
    runtime: Runtime, results: Sequence[ExampleResult], *, job_id: str, worker: str
) -> tuple[list[EvaluationRecord], list[RolloutRecord], list[AttemptRecord]]:
    """Evaluation rows, each with a rollout and attempt row (stored only where a tracer
    has not recorded that rollout already)."""
    evaluations, rollouts, attempts = [], [], []
    config = runtime.config.runtime
    finished = time.time()
    for result in results:
        split = result.split or ""
        rollout_id = result.rollout_id or "ro-" + content_hash(
            [runtime.scope, result.candidate_id, result.example_id, split], 20
        )
        status = "failed" if result.error else "succeeded"
        started = finished - result.latency_s
        example = runtime.example(split, result.example_id)
        tries = max(1, result.attempts)
        rollouts.append(
            RolloutRecord(
                id=rollout_id,
                job_id=job_id,
                candidate_id=result.candidate_id,
                example_id=result.example_id,
                split=split,
                mode=split,
                status=status,
                input=example.input if example is not None else None,
                output=result.output,
                score=result.score,
                error=result.error,
                max_attempts=config.max_attempts,
                timeout_seconds=config.timeout_s,
                attempt_count=tries,
                metadata={"lm_calls": result.lm_calls},
                created_at=_at(started),
                started_at=_at(started),
                finished_at=_at(finished),
            )
        )
        attempts.append(
            AttemptRecord(
                id=f"{rollout_id}:{tries}",
                rollout_id=rollout_id,
                number=tries,
                status=status,
                worker_id=worker,
                error=result.error,
                started_at=_at(started),
                heartbeat_at=_at(finished),
                finished_at=_at(finished),
            )
        )
        evaluations.append(
            EvaluationRecord(
                scope=runtime.scope,
                example_hash=runtime.hashes.get((split, result.example_id), ""),
                job_id=job_id,
                rollout_id=rollout_id,
                result=result,
            )
        )
    return evaluations, rollouts, attempts

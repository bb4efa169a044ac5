"""Evaluation writes per second: SQLite file, in-memory and PostgreSQL side by side.

Each store receives the same evaluations through ``commit_step``, the engine's one
transaction per step, in batches of 1, 10 and 100 evaluations per transaction. A row here
is what the engine writes for one scored rollout: the evaluation, its rollout and its
attempt (plus, once per transaction, an event and the checkpoint).

    .venv/bin/python benchmarks/store/writes.py --rows 2000
    EMERY_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:55432/emery_test \\
        .venv/bin/python benchmarks/store/writes.py

PostgreSQL is measured when ``--postgres URL`` or ``$EMERY_TEST_POSTGRES_URL`` is given
(its tables are dropped afterwards, so point it at a scratch database).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from emery.core.events import event
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate
from emery.core.rollouts import Attempt, Rollout
from emery.store import (
    CheckpointRecord,
    EvaluationRecord,
    MemoryStore,
    NewJob,
    PostgresStore,
    SQLiteStore,
    StepWrite,
)
from emery.store.schema import metadata
from emery.store.sql import SqlStore


def step(job_id: str, candidate: Candidate, start: int, count: int) -> StepWrite:
    """One transaction's worth: ``count`` evaluations with their rollouts and attempts."""
    now = datetime.now(UTC)
    evaluations, rollouts, attempts = [], [], []
    for index in range(start, start + count):
        rollout_id = f"ro-{job_id}-{index}"
        result = ExampleResult(
            candidate_id=candidate.id,
            example_id=f"ex-{index}",
            split="val",
            output=str(index),
            score=float(index % 2),
            feedback="The answer matches." if index % 2 else "Expected 12, got 13.",
            lm_calls=1,
            latency_s=0.2,
        )
        evaluations.append(
            EvaluationRecord(
                scope="bench", example_hash=f"h{index}", rollout_id=rollout_id, result=result
            )
        )
        rollouts.append(
            Rollout(
                id=rollout_id,
                job_id=job_id,
                candidate_id=candidate.id,
                example_id=result.example_id,
                split="val",
                status="succeeded",
                input={"question": f"What is {index} + 1?"},
                output=result.output,
                score=result.score,
                attempt_count=1,
                created_at=now,
                finished_at=now,
            )
        )
        attempts.append(
            Attempt(
                id=f"{rollout_id}:1",
                rollout_id=rollout_id,
                number=1,
                status="succeeded",
                started_at=now,
                finished_at=now,
            )
        )
    return StepWrite(
        events=[
            event("candidate_evaluated", candidate_id=candidate.id, split="val", score=0.5, n=count)
        ],
        evaluations=evaluations,
        rollouts=rollouts,
        attempts=attempts,
        checkpoint=CheckpointRecord(
            job_id=job_id, number=start, state={"iteration": start}, budget={}, usage={}
        ),
    )


def measure(store: SqlStore, rows: int, batch: int, label: str) -> float:
    """Rows per second committing ``rows`` evaluations ``batch`` at a time."""
    job_id = f"{label}-{batch}"
    store.create_job(NewJob(id=job_id, name=job_id, algorithm="bench", config={}))
    candidate = Candidate(components={"solve": f"Instruction for {job_id}."})
    store.add_candidates(job_id, [candidate])
    writes = [step(job_id, candidate, start, batch) for start in range(0, rows, batch)]
    started = time.perf_counter()
    for write in writes:
        store.commit_step(job_id, write)
    elapsed = time.perf_counter() - started
    assert store.count_evaluations(job_id) == len(writes) * batch
    return len(writes) * batch / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="evaluations per measurement")
    parser.add_argument("--batches", default="1,10,100", help="evaluations per transaction")
    parser.add_argument("--postgres", default=os.environ.get("EMERY_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    folder = Path(tempfile.mkdtemp(prefix="emery-bench-"))
    stores: dict[str, Callable[[], SqlStore]] = {
        "sqlite file": lambda: SQLiteStore(folder / "emery.db"),
        "memory": MemoryStore,
    }
    if args.postgres:
        stores["postgresql"] = lambda: PostgresStore(args.postgres)
    results: dict[str, dict[int, float]] = {}
    for name, make in stores.items():
        store = make()
        try:
            results[name] = {
                batch: measure(store, args.rows, batch, name.split()[0]) for batch in batches
            }
        finally:
            if name == "postgresql":
                metadata.drop_all(store.engine)
            store.close()

    print(f"evaluation rows per second ({args.rows} rows each; a row = evaluation + rollout")
    print("+ attempt; one event and one checkpoint per transaction)")
    header = f"{'store':<12}" + "".join(f"{f'batch {b}':>12}" for b in batches)
    print(header)
    for name, by_batch in results.items():
        print(f"{name:<12}" + "".join(f"{by_batch[b]:>12,.0f}" for b in batches))
    if "postgresql" in results:
        ratios = "".join(
            f"{results['sqlite file'][b] / results['postgresql'][b]:>12.2f}" for b in batches
        )
        print(f"{'sqlite/pg':<12}{ratios}")
    first, last = batches[0], batches[-1]
    for name, by_batch in results.items():
        gain = by_batch[last] / by_batch[first]
        print(f"{name}: {last} per transaction writes {gain:.1f}x as fast as {first}")


if __name__ == "__main__":
    main()

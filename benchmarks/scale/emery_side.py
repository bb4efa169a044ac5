"""emery's side of the scale benchmark: its store-as-queue protocol on one store.

Usage: python emery_side.py --store memory|sqlite|URL --runners 8,32,128 --rollouts 600
                            --ops 600 [--agent-s 1.0] --out result.json

The calls an ``emery runner`` makes, with the rows a ``runners`` job writes:
``add_rollouts`` (queued rollouts with queue metadata), ``claim_rollout`` (the next
attempt starts, leased), ``heartbeat_attempt``, ``add_spans`` (the attempt's spans in one
write, as the runner's write-behind recorder does) and ``finish_rollout``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workload import op_rates, run_runners

from emery.core.rollouts import Rollout, RolloutConfig
from emery.core.spans import SpanRecord
from emery.store import MemoryStore, NewJob, PostgresStore, SQLiteStore
from emery.store.queue import queue_metadata
from emery.store.records import RolloutEnd
from emery.store.schema import metadata
from emery.store.sql import SqlStore


class EmerySide:
    """One running job's queue on ``store``."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.job_id = f"bench-{uuid.uuid4().hex[:8]}"
        store.create_job(NewJob(id=self.job_id, name=self.job_id, algorithm="gepa", config={}))
        store.transition(self.job_id, "queued")
        store.transition(self.job_id, "running")
        self.count = 0

    def enqueue(self, n: int) -> None:
        rollouts = []
        for _ in range(n):
            self.count += 1
            rollouts.append(
                Rollout(
                    job_id=self.job_id,
                    candidate_id="c1",
                    example_id=f"e{self.count}",
                    split="val",
                    input={"question": f"q{self.count}"},
                    config=RolloutConfig(max_attempts=2),
                    metadata=queue_metadata("candidate:c1", 1, 30.0),
                )
            )
        self.store.add_rollouts(rollouts)

    def claim(self, worker: str) -> Rollout | None:
        return self.store.claim_rollout(worker, job_id=self.job_id)

    def update(self, handle: Rollout) -> None:
        self.store.heartbeat_attempt(f"{handle.id}:{handle.attempt_count}")

    def add_spans(self, handle: Rollout, n: int) -> None:
        self.store.add_spans(spans(self.job_id, handle, n))

    def finish(self, handle: Rollout) -> None:
        self.store.finish_rollout(*finish_args(handle))

    def finish_and_claim(self, handle: Rollout, worker: str) -> Rollout | None:
        """The finish and the worker's next claim in one transaction, as ``emery runner``
        sends them."""
        return self.store.finish_and_claim(
            *finish_args(handle), worker_id=worker, job_id=self.job_id
        )[1]


def spans(job_id: str, handle: Rollout, n: int) -> list[SpanRecord]:
    """An attempt's ``n`` spans, as a runner's write-behind recorder writes them (both sides)."""
    at = datetime.now(UTC)
    trace = uuid.uuid4().hex
    return [
        SpanRecord(
            trace_id=trace,
            span_id=uuid.uuid4().hex[:16],
            name="emery.lm" if i else "emery.rollout",
            start_time=at,
            end_time=at,
            attributes={"gen_ai.usage.input_tokens": 12, "i": i},
            job_id=job_id,
            rollout_id=handle.id,
            attempt_id=f"{handle.id}:{handle.attempt_count}",
            sequence=i,  # numbered by the attempt's scope, as a runner's spans are
        )
        for i in range(n)
    ]


def finish_args(handle: Rollout) -> tuple[str, str, RolloutEnd]:
    """A finish's rollout, attempt and end (built as ``emery runner`` builds it)."""
    attempt = f"{handle.id}:{handle.attempt_count}"
    end = RolloutEnd(
        status="succeeded",
        attempt_status="succeeded",
        error=None,
        output="ok",
        score=1.0,
        result={"score": 1.0, "output": "ok", "attempt": attempt},
    )
    return handle.id, attempt, end


def open_side_store(kind: str, folder: Path) -> SqlStore:
    """A fresh store: in memory, a new SQLite file, or emptied PostgreSQL tables."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(folder / f"{uuid.uuid4().hex[:6]}.db")
    store = PostgresStore(kind)
    metadata.drop_all(store.engine)
    store.close()
    return PostgresStore(kind)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--runners", default="8,32,128")
    parser.add_argument("--rollouts", type=int, default=600)
    parser.add_argument("--ops", type=int, default=600)
    parser.add_argument("--agent-s", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result: dict[str, Any] = {"runners": {}}
    with tempfile.TemporaryDirectory() as folder:
        if args.ops:
            result["ops"] = op_rates(EmerySide(open_side_store(args.store, Path(folder))), args.ops)
        for n in (int(x) for x in args.runners.split(",") if x):
            side = EmerySide(open_side_store(args.store, Path(folder)))
            result["runners"][str(n)] = run_runners(side, n, args.rollouts, args.agent_s)
            side.store.close()
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

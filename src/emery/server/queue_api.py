"""``/api/queue``: the rollout queue for runners over HTTP (``emery runner --server``).

Each route is one call of the store's queue (``RolloutQueue``), in the store's own
transaction: a claim leases the oldest queued rollout, a heartbeat renews a lease, a finish
keeps a rollout's first result only. A server started with a runner key
(``$EMERY_RUNNER_KEY``) lets that key reach these routes and nothing else.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from emery.core.errors import EmeryError
from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.store.protocol import Store
from emery.store.records import WorkerRecord

QUEUE_PREFIX = "/api/queue"


Id = Annotated[str, Field(min_length=1, max_length=200)]


class Beat(BaseModel):
    worker_id: Id
    status: str | None = None
    job_id: Id | None = None


class Claim(BaseModel):
    worker_id: Id
    job_id: Id | None = None


class AttemptBeat(BaseModel):
    attempt_id: Id


class Finish(BaseModel):
    rollout_id: Id
    attempt_id: Id
    status: str
    attempt_status: str
    error: str | None = None
    output: Any = None
    score: float | None = None
    result: dict[str, Any] = Field(default_factory=dict)


class Requeue(BaseModel):
    rollout_id: Id
    attempt_id: Id
    number: int = Field(ge=1, le=1_000_000)
    attempt_status: str
    error: str


class Expire(BaseModel):
    job_id: Id | None = None


class Traces(BaseModel):
    rollouts: list[Rollout] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    spans: list[SpanRecord] = Field(default_factory=list)


def queue_router(store: Store) -> APIRouter:
    """The queue routes over ``store``."""
    router = APIRouter(prefix=QUEUE_PREFIX, tags=["queue"])

    @router.get("/jobs/{job}")
    def job(job: str) -> dict[str, Any]:
        """The job a claimed rollout belongs to, with its config (to rebuild its system)."""
        return store.get_job(store.resolve_job_id(job)).model_dump(mode="json")

    @router.get("/resource")
    def resource(name: str, version: int | None = None) -> dict[str, Any]:
        """A versioned resource: the candidate a queued rollout names."""
        return store.get_resource(name, version).model_dump(mode="json")

    @router.post("/workers")
    def register(record: WorkerRecord) -> dict[str, Any]:
        store.register_worker(record)
        return {"registered": record.id}

    @router.post("/workers/heartbeat")
    def worker_beat(beat: Beat) -> dict[str, Any]:
        store.worker_heartbeat(beat.worker_id, status=beat.status, job_id=beat.job_id)
        return {"ok": True}

    @router.post("/claim")
    def claim(request: Claim) -> dict[str, Any]:
        """Put rollouts whose lease ran out back in the queue (as a runner on the database
        does before each claim), then the oldest queued rollout of a running job, leased
        to the worker (null: none)."""
        store.expire_leases(job_id=request.job_id)
        rollout = store.claim_rollout(request.worker_id, job_id=request.job_id)
        return {"rollout": None if rollout is None else rollout.model_dump(mode="json")}

    @router.post("/attempts/heartbeat")
    def attempt_beat(beat: AttemptBeat) -> dict[str, bool]:
        """Renew an attempt's lease; false once it is lost."""
        return {"kept": store.heartbeat_attempt(beat.attempt_id)}

    @router.post("/finish")
    def finish(body: Finish) -> dict[str, bool]:
        """End the attempt; keep its result unless the rollout already has one."""
        kept = store.finish_rollout(
            body.rollout_id,
            body.attempt_id,
            status=body.status,
            attempt_status=body.attempt_status,
            error=body.error,
            output=body.output,
            score=body.score,
            result=body.result,
        )
        return {"kept": kept}

    @router.post("/requeue")
    def requeue(body: Requeue) -> dict[str, bool]:
        """End a retriable attempt and put its rollout back in the queue."""
        kept = store.requeue_rollout(
            body.rollout_id,
            body.attempt_id,
            body.number,
            attempt_status=body.attempt_status,
            error=body.error,
        )
        return {"kept": kept}

    @router.post("/expire")
    def expire(body: Expire) -> dict[str, int]:
        """Put rollouts whose lease ran out back in the queue."""
        return {"expired": store.expire_leases(job_id=body.job_id)}

    @router.post("/traces")
    def traces(body: Traces) -> dict[str, int]:
        """Store a runner's rollouts, attempts and spans (its write-behind batches)."""
        try:
            store.add_traces(body.rollouts, body.attempts, body.spans)
        except OverflowError:
            raise EmeryError("a number in the traces is too large for the store") from None
        return {"spans": len(body.spans)}

    return router

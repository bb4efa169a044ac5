"""``/api/queue``: the rollout queue for runners over HTTP (``emery runner --server``).

Each route is one call of the store's queue (``RolloutQueue``), in the store's own
transaction: a claim leases the oldest queued rollout, a heartbeat renews a lease, a finish
keeps a rollout's first result only. A claim also puts rollouts whose lease ran out back in
the queue, at most every ``EXPIRE_EVERY_S`` per job (``Expiry``).

A runner's span batches ride on its next queue request (``traces`` in a claim, heartbeat,
finish or requeue body; ``POST /traces`` alone when nothing else is sent): they are stored
in their own transaction before the request's own call; a batch the store refuses refuses
the request (400) before that call is made, and ``HttpQueue`` sends it again without.

The runners' routes are ``async``: the body is validated on the event loop, the store's
work runs in one thread, and the answer is written by pydantic-core, not through a
response model (a request costs the server about half the CPU it did through FastAPI's
defaults). A server started with a runner key (``$EMERY_RUNNER_KEY``) lets that key reach
these routes and nothing else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from emery.core.errors import EmeryError
from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.store.protocol import Store
from emery.store.records import RolloutEnd, WorkerRecord

QUEUE_PREFIX = "/api/queue"
EXPIRE_EVERY_S = 0.5
"""A claim puts expired leases back in the queue at most this often (per job)."""
TOO_LARGE = "a number in the traces is too large for the store"


Id = Annotated[str, Field(min_length=1, max_length=200)]


class Traces(BaseModel):
    rollouts: list[Rollout] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    spans: list[SpanRecord] = Field(default_factory=list)


class Carrier(BaseModel):
    """A runner request that may carry the span batches it holds."""

    traces: Traces | None = None


class Beat(Carrier):
    worker_id: Id
    status: str | None = None
    job_id: Id | None = None


class Claim(Carrier):
    worker_id: Id
    job_id: Id | None = None


class AttemptBeat(Carrier):
    attempt_id: Id


class NextClaim(BaseModel):
    """Whom a finish claims the next rollout for (``finish_and_claim``)."""

    worker_id: Id
    job_id: Id | None = None


class Finish(RolloutEnd, Carrier):
    """A finish: the attempt, how it ended (``RolloutEnd``'s fields, flat in the body)
    and, with ``claim``, whom to claim the next rollout for."""

    rollout_id: Id
    attempt_id: Id
    claim: NextClaim | None = None
    """Claim the next rollout for this worker in the same transaction (the answer's
    ``rollout``, null when none is queued)."""

    def end(self) -> RolloutEnd:
        """How the attempt ended, as the store takes it (the body's end fields)."""
        return RolloutEnd(**self.fields())


class Requeue(Carrier):
    rollout_id: Id
    attempt_id: Id
    number: int = Field(ge=1, le=1_000_000)
    attempt_status: str
    error: str


class Expire(BaseModel):
    job_id: Id | None = None


class Expiry:
    """When a claim on the server also expires leases: at most every ``every_s`` per job
    (``None``: every job), so a lease is given up at most ``every_s`` after it ran out and
    busy runners' claims do not each pay a scan of the live attempts."""

    def __init__(
        self, every_s: float = EXPIRE_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every_s = every_s
        self.clock = clock
        self._last: dict[str | None, float] = {}
        self._lock = threading.Lock()

    def due(self, job_id: str | None) -> bool:
        """True (and the time noted) when ``job_id``'s leases should be expired now."""
        now = self.clock()
        with self._lock:
            last = self._last.get(job_id)
            if last is not None and now - last < self.every_s:
                return False
            self._last[job_id] = now
            return True


def json_answer(body: bytes) -> Response:
    """An answer already serialized (no response model's validation and encoding)."""
    return Response(body, media_type="application/json")


def kept_answer(kept: bool) -> bytes:
    return b'{"kept":true}' if kept else b'{"kept":false}'


def queue_router(store: Store, expiry: Expiry | None = None) -> APIRouter:
    """The queue routes over ``store`` (module doc)."""
    router = APIRouter(prefix=QUEUE_PREFIX, tags=["queue"])
    expiry = expiry or Expiry()

    def store_traces(traces: Traces) -> None:
        try:
            store.add_traces(traces.rollouts, traces.attempts, traces.spans)
        except OverflowError:
            raise EmeryError(TOO_LARGE) from None

    def carried(body: Carrier) -> None:
        """Store the batches ``body`` carries (a refusal refuses the request: 400)."""
        if body.traces is not None:
            store_traces(body.traces)

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

    def worker_beat_one(beat: Beat) -> bytes:
        carried(beat)
        store.worker_heartbeat(beat.worker_id, status=beat.status, job_id=beat.job_id)
        return b'{"ok":true}'

    @router.post("/workers/heartbeat", response_model=dict[str, Any])
    async def worker_beat(beat: Beat) -> Response:
        """The worker row's heartbeat (and status, and job)."""
        return json_answer(await run_in_threadpool(worker_beat_one, beat))

    def claim_one(request: Claim) -> bytes:
        carried(request)
        if expiry.due(request.job_id):
            store.expire_leases(job_id=request.job_id)
        rollout = store.claim_rollout(request.worker_id, job_id=request.job_id)
        answer = b"null" if rollout is None else rollout.model_dump_json().encode()
        return b'{"rollout":' + answer + b"}"

    @router.post("/claim", response_model=dict[str, Any])
    async def claim(request: Claim) -> Response:
        """The oldest queued rollout of a running job, leased to the worker (null: none).
        Before it, rollouts whose lease ran out go back in the queue, as a runner on the
        database does before each claim (here at most every ``EXPIRE_EVERY_S``)."""
        return json_answer(await run_in_threadpool(claim_one, request))

    def attempt_beat_one(beat: AttemptBeat) -> bytes:
        carried(beat)
        return kept_answer(store.heartbeat_attempt(beat.attempt_id))

    @router.post("/attempts/heartbeat", response_model=dict[str, Any])
    async def attempt_beat(beat: AttemptBeat) -> Response:
        """Renew an attempt's lease; false once it is lost."""
        return json_answer(await run_in_threadpool(attempt_beat_one, beat))

    def finish_one(body: Finish) -> bytes:
        carried(body)  # the attempt's spans are stored before its result
        end = body.end()
        if body.claim is None:
            return kept_answer(store.finish_rollout(body.rollout_id, body.attempt_id, end))
        nxt = body.claim
        if expiry.due(nxt.job_id):
            store.expire_leases(job_id=nxt.job_id)
        kept, rollout = store.finish_and_claim(
            body.rollout_id, body.attempt_id, end, worker_id=nxt.worker_id, job_id=nxt.job_id
        )
        claimed = b"null" if rollout is None else rollout.model_dump_json().encode()
        return b'{"kept":' + (b"true" if kept else b"false") + b',"rollout":' + claimed + b"}"

    @router.post("/finish", response_model=dict[str, Any])
    async def finish(body: Finish) -> Response:
        """End the attempt; keep its result unless the rollout already has one. With
        ``claim``, also claim the worker's next rollout, in the same transaction."""
        return json_answer(await run_in_threadpool(finish_one, body))

    def requeue_one(body: Requeue) -> bytes:
        carried(body)
        kept = store.requeue_rollout(
            body.rollout_id,
            body.attempt_id,
            body.number,
            attempt_status=body.attempt_status,
            error=body.error,
        )
        return kept_answer(kept)

    @router.post("/requeue", response_model=dict[str, Any])
    async def requeue(body: Requeue) -> Response:
        """End a retriable attempt and put its rollout back in the queue."""
        return json_answer(await run_in_threadpool(requeue_one, body))

    @router.post("/expire")
    def expire(body: Expire) -> dict[str, int]:
        """Put rollouts whose lease ran out back in the queue."""
        return {"expired": store.expire_leases(job_id=body.job_id)}

    def traces_one(body: Traces) -> bytes:
        store_traces(body)
        return b'{"spans":%d}' % len(body.spans)

    @router.post("/traces", response_model=dict[str, int])
    async def traces(body: Traces) -> Response:
        """Store a runner's rollouts, attempts and spans (its write-behind batches)."""
        return json_answer(await run_in_threadpool(traces_one, body))

    return router

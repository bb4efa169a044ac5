"""``/api/jobs``: list, read, create and steer jobs, and follow their events (also as SSE).

Jobs are named by id, unique id prefix or name, as on the command line. Pause and cancel
ask the running engine (it acts within a fraction of a second) and answer at once unless
``wait`` gives seconds to wait for it; resume and create start the run the server's
``JobLauncher`` way (a job process, as ``emery train --no-poll`` does).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from emery.config.code_settings import code_settings
from emery.config.loading import parse_config
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.jobs.manage import cancel_job, create_job, pause_job
from emery.server.launcher import JobLauncher, resume
from emery.server.params import SQL_INT_MAX, Offset, Since
from emery.server.sse import event_stream
from emery.server.views import job_view
from emery.store.protocol import Store
from emery.store.records import JobFilter
from emery.store.sql.jobs import JOB_SORTS
from emery.store.states import JobState, NotFound

_SORT_KEY = f"[-+]?({'|'.join(sorted(JOB_SORTS))})"
SortQuery = Annotated[
    str,
    Query(
        pattern=f"^{_SORT_KEY}(,{_SORT_KEY})*$",
        description="Columns to sort by, comma separated; ``-`` before one sorts it descending.",
    ),
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        min_length=1,
        max_length=200,
        description="A key of the client's choosing: a request with one already used"
        " answers the job it made instead of making another.",
    ),
]
WaitQuery = Annotated[
    float, Query(ge=0, le=60, description="Seconds to wait for the engine to act.")
]


class NewJobBody(BaseModel):
    """A job to create: its config as a TOML file would hold it, as JSON."""

    config: dict[str, Any] = Field(description="The job config ([job], [dataset], [lm]...).")
    name: str | None = Field(default=None, max_length=200)
    start: bool = Field(default=True, description="Start running it at once.")


def jobs_router(
    store: Store, launcher: JobLauncher, base_dir: Path, *, allow_code: bool = False
) -> APIRouter:
    """The job routes over ``store``; relative paths in created configs are under
    ``base_dir``; a created config that runs code on this host is refused unless
    ``allow_code``."""
    router = APIRouter(prefix="/api/jobs", tags=["jobs"])

    @router.get("")
    def list_jobs(
        state: Annotated[list[JobState] | None, Query()] = None,
        algorithm: str | None = None,
        system: str | None = None,
        kind: str | None = None,
        name: str | None = None,
        sort: SortQuery = "-created_at",
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Jobs, newest first, with their budget use; every filter given must match."""
        page = store.list_jobs(
            JobFilter(
                state=list(state) if state else None,
                algorithm=algorithm,
                system_name=system,
                kind=kind,
                name=name,
            ),
            sort=sort,
            limit=limit,
            offset=offset,
        )
        jobs = [job_view(store, job) for job in page.items]
        return {"total": page.total, "offset": offset, "limit": limit, "jobs": jobs}

    @router.post("", status_code=201)
    def new_job(
        body: NewJobBody, response: Response, idempotency_key: IdempotencyKey = None
    ) -> dict[str, Any]:
        """Validate a config, store the job (of any ``[job] type``: prompt, sft or rl, as
        ``emery train`` does) and (with ``start``) run it in the background. A request
        with an ``Idempotency-Key`` already used answers the job that key made (200), so a
        retried request makes no second job; the key with another body is a 409."""
        config = parse_config(body.config, "config")
        if not allow_code:
            refuse_code(config)
        request_hash = ""
        if idempotency_key is not None:
            request_hash = _request_hash(body)
            made = store.keyed_job(idempotency_key)
            if made is not None:
                return _replay(store, idempotency_key, made, request_hash, response)
        try:
            job = create_job(store, config, given=body.config, base_dir=base_dir, name=body.name)
        except NotFound as exc:  # a source job the config names: the body is wrong, not the URL
            raise ConfigError(f"config: {exc}") from None
        if idempotency_key is not None:
            made = store.bind_key(idempotency_key, request_hash, job.id)
            if made[0] != job.id:  # a request with the same key got there first
                store.delete_job(job.id)
                return _replay(store, idempotency_key, made, request_hash, response)
        if body.start:
            launcher.launch(store, job.id)
        return job_view(store, store.get_job(job.id), full=True)

    @router.get("/{job}")
    def get_job(job: str) -> dict[str, Any]:
        """One job in full: config, result, budget and LM usage."""
        return job_view(store, store.get_job(store.resolve_job_id(job)), full=True)

    @router.post("/{job}/pause")
    def pause(job: str, wait: WaitQuery = 0.0) -> dict[str, Any]:
        """Pause a job; it keeps everything stored and resume continues it."""
        record = pause_job(store, store.resolve_job_id(job), wait_s=wait)
        return job_view(store, record)

    @router.post("/{job}/resume")
    def resume_job(job: str) -> dict[str, Any]:
        """Continue a paused job from its last checkpoint (or withdraw a pending pause)."""
        return job_view(store, resume(store, launcher, store.resolve_job_id(job)))

    @router.post("/{job}/cancel")
    def cancel(job: str, wait: WaitQuery = 0.0) -> dict[str, Any]:
        """Cancel a job for good; what it stored stays."""
        record = cancel_job(store, store.resolve_job_id(job), wait_s=wait)
        return job_view(store, record)

    _add_event_routes(router, store)
    return router


def refuse_code(config: JobConfig) -> None:
    """A ConfigError (400) naming the first setting of ``config`` that would run code on
    the server's host."""
    found = code_settings(config)
    if found:
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        raise ConfigError(
            f"config: {found[0]}{more} would run code on the server's host with its"
            " permissions; this server takes no such config (start it with --allow-code"
            " to allow that, or run the job with emery train)"
        )


def _request_hash(body: NewJobBody) -> str:
    """What tells two requests with one key apart: a hash of the whole body (text escaped,
    so a lone surrogate in a name hashes too; ``create_job`` refuses it after)."""
    text = json.dumps(body.model_dump(mode="json"), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _replay(
    store: Store, key: str, made: tuple[str, str], request_hash: str, response: Response
) -> dict[str, Any]:
    """The job an earlier request with ``key`` made (200), or a 409 when that request's
    body was another."""
    job_id, first_hash = made
    if first_hash != request_hash:
        raise HTTPException(
            409,
            f"Idempotency-Key {key!r} was used for another request (it made job {job_id}):"
            " send a new key for a new job",
        )
    response.status_code = 200
    return job_view(store, store.get_job(job_id), full=True)


def resumed_seq(last_event_id: str | None) -> int:
    """The sequence number a reconnecting ``EventSource`` sent (0 when it is not one)."""
    text = (last_event_id or "").strip()
    if not (text.isascii() and text.isdecimal()) or int(text) > SQL_INT_MAX:
        return 0
    return int(text)


def _add_event_routes(router: APIRouter, store: Store) -> None:
    @router.get("/{job}/events")
    def events(
        job: str,
        since: Since = 0,
        kind: Annotated[list[str] | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    ) -> dict[str, Any]:
        """Events after sequence number ``since``, in order."""
        job_id = store.resolve_job_id(job)
        items = store.list_events(job_id, since=since, kinds=kind or None, limit=limit)
        return {"job_id": job_id, "events": [item.model_dump(mode="json") for item in items]}

    @router.get("/{job}/events/stream", response_class=StreamingResponse)
    def stream(
        job: str,
        since: Since = 0,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        """Server-Sent Events: stored events after ``since`` (or ``Last-Event-ID``), then
        new ones live; an ``end`` event when the job has stopped running."""
        job_id = store.resolve_job_id(job)
        since = max(since, resumed_seq(last_event_id))
        return StreamingResponse(
            event_stream(store, job_id, since=since),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

"""Creating, running and steering jobs: what the CLI and the SDK share.

Pause and cancel work from any process: a running job gets a request in its row that its
engine acts on within a fraction of a second; a job that is not running (or whose engine
is gone) changes state directly.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from emery.config.resolve import JobInputs, ResolvedJob
from emery.config.schema import JobConfig
from emery.config.storable import check_storable
from emery.core.errors import EmeryError
from emery.core.events import Event, EventSink
from emery.jobs.kinds import JobRun, kind_for, kind_of
from emery.jobs.ownership import is_stale, starting_elsewhere
from emery.store.backends import STORE_ENV
from emery.store.protocol import Store
from emery.store.records import JobFilter, JobRecord
from emery.store.states import TERMINAL_STATES, IllegalTransition

RESUMABLE = ("created", "queued", "paused")
QUEUEABLE = ("created", "paused")
"""The states a run is started from by claiming the job (``queue_job``)."""


def create_job(
    store: Store,
    config: JobConfig,
    *,
    given: dict[str, Any] | None = None,
    config_path: Path | None = None,
    base_dir: Path | None = None,
    name: str | None = None,
    metadata: dict[str, Any] | None = None,
    inputs: JobInputs | None = None,
) -> JobRecord:
    """Validate ``config`` and store a new job of its kind (``kinds.kind_for``: a prompt
    search or evaluation, SFT or RL) once the kind's checks pass. The CLI, the SDK and the
    server all create jobs here.

    ``given`` is the config as the user wrote it (stored beside the resolved one).
    """
    job, _ = create_job_with_objects(
        store,
        config,
        given=given,
        config_path=config_path,
        base_dir=base_dir,
        name=name,
        metadata=metadata,
        inputs=inputs,
    )
    return job


def create_job_with_objects(
    store: Store,
    config: JobConfig,
    *,
    given: dict[str, Any] | None = None,
    config_path: Path | None = None,
    base_dir: Path | None = None,
    name: str | None = None,
    metadata: dict[str, Any] | None = None,
    inputs: JobInputs | None = None,
) -> tuple[JobRecord, ResolvedJob | None]:
    """``create_job``, and what the config resolved to on the way, for a run of the job in
    this process (its kind's engine takes it as ``objects``)."""
    if name is not None:
        check_storable(name, "the job name")
    kind = kind_for(config)
    objects = kind.check(store, config, config_path=config_path, base_dir=base_dir, inputs=inputs)
    job = kind.create(
        store,
        config,
        objects,
        given=given,
        config_path=config_path,
        base_dir=base_dir,
        name=name,
        metadata=metadata,
        inputs=inputs,
    )
    return job, objects


def run_job(
    store: Store,
    job_id: str,
    *,
    inputs: JobInputs | None = None,
    on_event: EventSink | None = None,
    engine: JobRun | None = None,
) -> JobRecord:
    """Run or resume a job of any kind in this process until it stops (blocking)."""
    if engine is None:
        kind = kind_of(store.get_job(job_id))
        engine = kind.engine(store, job_id, inputs=inputs, on_event=on_event)
    return asyncio.run(engine.run())


def spawn_job_process(store: Store, job_id: str, *, log_dir: Path | None = None) -> int | None:
    """Run a job in a detached ``python -m emery jobs run`` process; returns its pid, or
    None when no process was started because the one starting the job already (it
    reserved the job, see ``ownership.reserve_job``) will run it."""
    if store.url.startswith("memory"):
        raise EmeryError("an in-memory store cannot be shared with a background process")
    job = queued_for_run(store, job_id)
    if starting_elsewhere(job):
        return None
    folder = log_dir or Path(job.base_dir or ".") / ".emery" / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, STORE_ENV: store.url.replace("sqlite:///", "", 1)}
    with open(folder / f"{job_id}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "emery", "jobs", "run", job_id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=os.getcwd(),
            start_new_session=True,
        )
    return process.pid


def queue_job(store: Store, job_id: str) -> JobRecord:
    """Claim a created or paused job for the run about to start: one conditional write moves
    it to ``queued``, so of several callers at once (in any process) only one gets it; the
    others, and a job in any other state, get IllegalTransition saying who has it."""
    reason = "resume requested" if store.get_job(job_id).state == "paused" else None
    try:
        job, _ = store.transition(job_id, "queued", reason=reason, expect=QUEUEABLE)
    except IllegalTransition:
        raise IllegalTransition(already(store.get_job(job_id))) from None
    return job


def already(job: JobRecord) -> str:
    """Why a run cannot be started for ``job`` as it is now, naming the run that has it."""
    if job.terminal:
        return f"job {job.id} has already {job.state}: nothing to resume"
    if job.state == "running":
        return f"job {job.id} is already running ({job.owner or 'its run is starting'})"
    if job.state == "queued":
        starting = f"process {job.owner}" if starting_elsewhere(job) else "its run"
        return f"job {job.id} is already queued: {starting} is starting"
    if job.state == "paused":
        return f"job {job.id} is paused again: a pause request came first"
    return f"job {job.id} is {job.state}: another request came first"


def queued_for_run(store: Store, job_id: str) -> JobRecord:
    """The job, claimed with ``queue_job`` when it is created or paused; one already queued
    or running (its engine gone) is left as it is, for its run to claim. A queued job that
    a live process is starting (``starting_elsewhere``) is refused: that process runs it.
    Whoever starts a run for the job returned checks ``starting_elsewhere`` first: a job
    paused while a process was starting it, and queued again now, is that process's."""
    job = store.get_job(job_id)
    if job.state in QUEUEABLE:
        return queue_job(store, job_id)
    if starting_elsewhere(job):
        raise IllegalTransition(already(job))
    return job


def pause_job(store: Store, job_id: str, *, wait_s: float | None = 30.0) -> JobRecord:
    """Pause a job: a running one at its next check (within a fraction of a second)."""
    return _steer(store, job_id, "pause", "paused", wait_s)


def cancel_job(store: Store, job_id: str, *, wait_s: float | None = 30.0) -> JobRecord:
    """Cancel a job; everything it stored is kept."""
    return _steer(store, job_id, "cancel", "cancelled", wait_s)


def _steer(store: Store, job_id: str, action: str, target: str, wait_s: float | None) -> JobRecord:
    """Ask the running engine, or change a job that none runs; each write is conditional on
    the state just read, so a job that starts running meanwhile is asked, never switched
    under its engine."""
    for _ in range(_STEER_TRIES):
        job = store.get_job(job_id)
        if job.state == target:
            return job
        if job.state in TERMINAL_STATES:
            raise IllegalTransition(f"job {job_id} has already {job.state}: it cannot be {target}")
        if job.state == "running" and not is_stale(job):
            if store.set_requested_action(job_id, action, only_state="running"):
                return wait_for(store, job_id, exclude=("running",), timeout_s=wait_s)
            continue
        reason = f"{action} requested"
        if job.state == "running":
            reason = f"{action} requested; the run ({job.owner}) was gone"
        fields: dict[str, Any] = {"requested_action": None}
        if job.state == "running" or target != "paused":
            fields["owner"] = None
        # A queued job keeps its owner, a process starting it (``reserve_job``), even one
        # that reserved it since it was read: that process finds the job paused when it
        # claims it and does not run it, unless a resume queued it again by then.
        try:
            job, _ = store.transition(
                job_id, target, reason=reason, expect=[job.state], fields=fields
            )
        except IllegalTransition:
            if store.get_job(job_id).state == job.state:
                raise  # not a state it can go to from here
            continue  # it changed since it was read: steer it as it is now
        return job
    raise IllegalTransition(f"job {job_id} kept changing state: try again")


_STEER_TRIES = 8


def wait_for(
    store: Store,
    job_id: str,
    *,
    exclude: Sequence[str] = ("created", "queued", "running"),
    timeout_s: float | None = None,
    poll_s: float = 0.1,
) -> JobRecord:
    """Poll until the job's state is none of ``exclude`` (or the timeout passes)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        job = store.get_job(job_id)
        if job.state not in exclude:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            return job
        time.sleep(poll_s)


def follow_events(
    store: Store,
    job_id: str,
    *,
    since: int = 0,
    follow: bool = True,
    poll_s: float = 0.25,
    timeout_s: float | None = None,
) -> Iterator[Event]:
    """Events after ``since``; with ``follow``, keep polling until the job stops running."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        state = store.get_job(job_id).state
        events = store.list_events(job_id, since=since)
        for item in events:
            since = item.seq or since
            yield item
        if not follow or state not in ("created", "queued", "running"):
            return
        if deadline is not None and time.monotonic() >= deadline:
            return
        if not events:
            time.sleep(poll_s)


def find_resumable(store: Store, config_hash: str) -> JobRecord | None:
    """The newest unfinished job with this exact config: paused, queued, or running with its
    engine gone."""
    page = store.list_jobs(
        JobFilter(config_hash=config_hash, state=[*RESUMABLE, "running"]), limit=20
    )
    for job in page.items:
        if job.state in RESUMABLE or is_stale(job):
            return job
    return None

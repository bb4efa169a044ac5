"""Which process runs a job: ``host:pid`` owners, heartbeats, telling a dead owner, and
claiming a job for this process."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.store.states import IllegalTransition, OwnershipLost

log = logging.getLogger(__name__)

STALE_AFTER_S = 30.0


class JobBusy(EmeryError):
    """The job is being run by another live process."""


def owner_id() -> str:
    """This process as a job owner: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def owner_alive(job: JobRecord, *, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether the owner of a running job still runs it: its process exists (same host) and
    its heartbeat is fresh, by the store's clock (``JobRecord.heartbeat_age_s``). A job
    with no owner has none alive."""
    if not job.owner:
        return False
    host, _, pid_text = job.owner.rpartition(":")
    if host == socket.gethostname() and pid_text.isdigit() and not pid_alive(int(pid_text)):
        return False
    if job.heartbeat_at is None:
        return False
    age = job.heartbeat_age_s
    if age is None:  # a record not read from a store (tests, a stored copy)
        age = time.time() - job.heartbeat_at.timestamp()
    return age < stale_after_s


def is_stale(job: JobRecord) -> bool:
    """A job recorded as running whose engine is gone (crashed, killed): resumable."""
    return job.state == "running" and not owner_alive(job)


SEARCH_KINDS = ("eval", "optimize")
"""The kinds of job the search engine runs (a prompt job's kind, by its algorithm)."""


def check_runnable(job: JobRecord, kinds: Collection[str] = SEARCH_KINDS) -> None:
    """Refuse a job of a kind other than ``kinds`` (another runtime runs it), a finished
    job, and one that another live process runs."""
    if job.kind not in kinds:
        raise EmeryError(
            f"job {job.id} is of kind {job.kind}, which this runtime does not run:"
            f" run it with `emery jobs resume {job.id}`"
        )
    if job.terminal:
        raise IllegalTransition(f"job {job.id} has already {job.state}: nothing to run")
    if job.state == "running" and owner_alive(job):
        raise JobBusy(f"job {job.id} is running in process {job.owner}")


_TRIES = 8
"""Reads and conditional writes before a claim gives up (each lost one means another
process changed the row in between)."""


def starting_elsewhere(job: JobRecord, owner: str | None = None) -> bool:
    """Whether a live process other than ``owner`` has reserved this job that is not
    running yet (``reserve_job``): it is building the job's run and will claim it. A
    queued job reserved by ``owner`` itself counts: another engine of this process has it."""
    if job.state == "running" or job.terminal or not job.owner or not owner_alive(job):
        return False
    return job.owner != owner or job.state == "queued"


_QUEUED_ONLY: ContextVar[bool] = ContextVar("emery_queued_only", default=False)


@contextmanager
def queued_runs_only() -> Iterator[None]:
    """Within it, a run never starts a paused job: it is the background run that a resume
    (or ``--no-poll``) queued the job for, and a pause that came before it started
    overrules that (``emery jobs run``, the server's threads)."""
    token = _QUEUED_ONLY.set(True)
    try:
        yield
    finally:
        _QUEUED_ONLY.reset(token)


def reserve_job(
    store: Store, job_id: str, owner: str, kinds: Collection[str] = SEARCH_KINDS
) -> JobRecord:
    """Make ``owner`` the process about to run the job, before it does any work: one
    conditional write on the row as read (``Store.swap_owner``), so of several processes
    (or engines) starting one job at once exactly one gets it and the others get JobBusy
    naming the winner. The job keeps its state until ``claim_job``; its owner and
    heartbeat tell others it is being started. A running job whose owner is gone is taken
    over here (``Store.take_over``, the same kind of write). Refuses what
    ``check_runnable`` refuses."""
    for _ in range(_TRIES):
        job = store.get_job(job_id)
        check_runnable(job, kinds)
        if _QUEUED_ONLY.get() and job.state == "paused":
            raise JobBusy(f"job {job_id} was {job.state} before its run started")
        if starting_elsewhere(job, owner):
            raise JobBusy(
                f"job {job_id} is already {job.state}: process {job.owner} is starting it"
            )
        if job.state == "running":  # its owner is gone (check_runnable)
            previous = job.owner
            reason = f"recovered: the previous run ({previous or 'unknown'}) is gone"
            try:
                taken, _ = store.take_over(
                    job_id, owner=owner, expect_owner=previous, reason=reason
                )
            except OwnershipLost:
                continue
            return taken
        reserved = store.swap_owner(job_id, owner, state=job.state, expect_owner=job.owner)
        if reserved is not None:
            return reserved
    raise JobBusy(f"job {job_id} kept changing hands while starting: try again")


def claim_job(
    store: Store,
    job: JobRecord,
    *,
    owner: str,
    emit: Callable[[Sequence[Event]], None],
    scope: str | None = None,
) -> JobRecord:
    """Make ``owner``, which reserved ``job`` (``reserve_job``: the row it returned), run
    it: queue a new job, then start or resume it; every write is conditional on ``owner``
    still holding the job. A job paused since it was reserved is not run (the reservation
    is dropped and JobBusy says so); one queued again meanwhile (a resume) is. Emits the
    state events as they are stored. ``scope``: the evaluation scope of a search job
    (see ``scope``), stored on the job."""
    fields: dict[str, Any] = {
        "owner": owner,  # its first heartbeat stamped by the store's clock
        "requested_action": None,
    }
    if scope is not None:
        fields["eval_scope"] = scope
    if scope is not None and job.eval_scope and job.eval_scope != scope:
        log.warning(
            "job %s: the system, task model or verifier changed since the job started;"
            " its stored evaluations are not reused",
            job.id,
        )
    for _ in range(_TRIES):
        current = store.get_job(job.id)
        if current.terminal:
            raise IllegalTransition(f"job {job.id} has already {current.state}: nothing to run")
        if current.owner != owner:
            raise JobBusy(f"job {job.id} was taken by {current.owner or 'another run'} first")
        if current.state == "running":
            if job.state != "running":  # another engine of this process started it
                raise JobBusy(f"job {job.id} is already running in process {owner}")
            del fields["requested_action"]  # a pause asked since the take-over stands
            taken = store.update_job(job.id, **fields)
            emit(store.list_events(job.id, kinds=["resumed"])[-1:])  # stored by reserve_job
            return taken
        if current.state not in ("created", "queued", job.state):  # paused since reserved
            if store.swap_owner(job.id, None, state=current.state, expect_owner=owner):
                raise JobBusy(f"job {job.id} was {current.state} before its run started")
            continue
        target = "queued" if current.state == "created" else "running"
        kind = target if target == "queued" else "resumed" if current.started_at else "started"
        try:
            claimed, events = store.transition(
                job.id,
                target,
                event_kind=kind,
                expect=[current.state],
                fields=fields if target == "running" else None,
                expect_owner=owner,
            )
        except IllegalTransition:  # the row changed since it was read: read it again
            continue
        emit(events)
        if target == "running":
            return claimed
    raise JobBusy(f"job {job.id} kept changing hands while starting: try again")

"""Which process runs a job: ``host:pid`` owners, heartbeats, telling a dead owner, and
claiming a job for this process."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.store.states import IllegalTransition

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
    its heartbeat is fresh. A job with no owner has none alive."""
    if not job.owner:
        return False
    host, _, pid_text = job.owner.rpartition(":")
    if host == socket.gethostname() and pid_text.isdigit() and not pid_alive(int(pid_text)):
        return False
    if job.heartbeat_at is None:
        return False
    return time.time() - job.heartbeat_at.timestamp() < stale_after_s


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


def claim_job(
    store: Store,
    job: JobRecord,
    *,
    owner: str,
    emit: Callable[[Sequence[Event]], None],
    scope: str | None = None,
) -> JobRecord:
    """Make ``owner`` run ``job``: queue a new job, then start or resume it, or take over a
    running job whose owner is gone. Emits the state events as they are stored. ``scope``:
    the evaluation scope of a search job (see ``scope``), stored on the job."""
    fields: dict[str, Any] = {
        "owner": owner,
        "heartbeat_at": time.time(),
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
    if job.state == "created":
        job, events = store.transition(job.id, "queued", expect=["created"])
        emit(events)
    if job.state == "running":
        previous = job.owner
        job, events = store.take_over(
            job.id,
            owner=owner,
            expect_owner=previous,
            reason=f"recovered: the previous run ({previous or 'unknown'}) is gone",
        )
        job = store.update_job(job.id, **fields)
    else:
        kind = "resumed" if job.started_at is not None else "started"
        job, events = store.transition(
            job.id, "running", event_kind=kind, expect=[job.state], fields=fields
        )
    emit(events)
    return job

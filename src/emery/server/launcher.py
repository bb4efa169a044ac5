"""How the server starts and resumes jobs: in a detached job process, as ``emery train
--no-poll`` and ``emery jobs resume --no-poll`` do, or in a thread of the server itself
(an in-memory store, which no other process can see)."""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from emery.jobs.manage import (
    QUEUEABLE,
    already,
    queue_job,
    queued_for_run,
    run_job,
    spawn_job_process,
)
from emery.jobs.ownership import owner_alive, queued_runs_only, starting_elsewhere
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.store.states import IllegalTransition

log = logging.getLogger(__name__)


class JobLauncher(Protocol):
    """Starts running a stored job somewhere and returns at once."""

    def launch(self, store: Store, job_id: str) -> None: ...


class ProcessLauncher:
    """Each job in its own ``python -m emery jobs run`` process (survives the server)."""

    def launch(self, store: Store, job_id: str) -> None:
        spawn_job_process(store, job_id)


class ThreadLauncher:
    """Each job in a daemon thread of this process (for stores only this process sees)."""

    def __init__(self) -> None:
        self.threads: dict[str, threading.Thread] = {}

    def launch(self, store: Store, job_id: str) -> None:
        queued_for_run(store, job_id)
        thread = threading.Thread(
            target=self._run, args=(store, job_id), name=f"emery-job-{job_id}", daemon=True
        )
        self.threads[job_id] = thread
        thread.start()

    @staticmethod
    def _run(store: Store, job_id: str) -> None:
        try:
            with queued_runs_only():  # a pause before the thread started overrules it
                run_job(store, job_id)
        except Exception:  # the job row says what failed; the server keeps serving
            log.exception("job %s stopped with an error", job_id)

    def join(self, timeout_s: float = 30.0) -> None:
        """Wait for every job thread started so far."""
        for thread in list(self.threads.values()):
            thread.join(timeout_s)


def launcher_for(store: Store) -> JobLauncher:
    """Job processes, or threads when the store lives in this process's memory."""
    return ThreadLauncher() if store.url.startswith("memory") else ProcessLauncher()


def resume(store: Store, launcher: JobLauncher, job_id: str) -> JobRecord:
    """Continue a paused (or crashed) job; a pause still pending is withdrawn instead.

    The job is claimed (moved to ``queued``) before it is launched, in one conditional
    write: of several resumes at once, in this process or another, one launches a run and
    the others get IllegalTransition (409)."""
    job = store.get_job(job_id)
    if job.state == "running" and owner_alive(job):
        if job.requested_action == "pause" and store.set_requested_action(
            job_id, None, only_state="running"
        ):
            return store.get_job(job_id)
        raise IllegalTransition(f"job {job_id} is already running ({job.owner})")
    if job.terminal:
        raise IllegalTransition(f"job {job_id} has already {job.state}: nothing to resume")
    if job.state == "queued":
        raise IllegalTransition(already(job))
    if job.state in QUEUEABLE:
        job = queue_job(store, job_id)  # of several resumes at once, only one claims it
        if starting_elsewhere(job):  # paused while a process was starting it: that one runs it
            return job
    launcher.launch(store, job_id)
    return store.get_job(job_id)

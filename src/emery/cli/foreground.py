"""Run a job of any kind in the CLI process with a live display; Ctrl-C pauses it cleanly
(a search at once, a trainer after its step).

With a poll timeout the command stops watching after that many seconds: the job is paused
at once and handed to a background process that resumes it from the checkpoint.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from dataclasses import dataclass

from emery.cli.console import err
from emery.cli.progress import RunDisplay, StreamFormat
from emery.config.loading import job_config
from emery.config.resolve import ResolvedJob
from emery.jobs.kinds import kind_of
from emery.jobs.manage import spawn_job_process
from emery.store.protocol import Store
from emery.store.records import JobRecord

INTERRUPTED = "interrupted (Ctrl-C)"
POLL_TIMEOUT = "poll timeout: continuing in the background"


@dataclass
class ForegroundOutcome:
    """How a foreground run ended: the job, whether Ctrl-C paused it, a handoff's pid."""

    job: JobRecord
    interrupted: bool = False
    job_pid: int | None = None


def run_foreground(
    store: Store,
    job_id: str,
    *,
    stream: StreamFormat = "cli",
    poll_timeout_s: float | None = None,
    objects: ResolvedJob | None = None,
) -> ForegroundOutcome:
    """Run (or resume) ``job_id`` here until it stops; see the module docstring.
    ``objects``: what creating the job in this process resolved its config to."""
    job = store.get_job(job_id)
    limit = job_config(job).job.budget.metric_calls
    display = RunDisplay(stream, err, job_id=job_id, limit=limit)
    display.replay(store.list_events(job_id))
    engine = kind_of(job).engine(
        store,
        job_id,
        on_event=display.feed,
        on_note=display.note,
        on_progress=display.progress,
        objects=objects,
    )
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            display.note("pausing... (Ctrl-C again to stop without waiting)")
            engine.request("pause", INTERRUPTED)
        else:
            # The job stays 'running' with a dead owner: `emery jobs resume` recovers it.
            os._exit(130)

    async def main() -> JobRecord:
        loop = asyncio.get_running_loop()
        handles_sigint = threading.current_thread() is threading.main_thread()
        if handles_sigint:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        if poll_timeout_s is not None:
            loop.call_later(poll_timeout_s, engine.request, "pause", POLL_TIMEOUT)
        try:
            return await engine.run()
        finally:
            if handles_sigint:
                loop.remove_signal_handler(signal.SIGINT)

    with display:
        job = asyncio.run(main())
    outcome = ForegroundOutcome(job=job)
    if job.state == "paused" and engine.requested == "pause":
        if job.stop_reason == POLL_TIMEOUT:
            outcome.job_pid = spawn_job_process(store, job_id)
            outcome.job = store.get_job(job_id)
        elif job.stop_reason == INTERRUPTED:
            outcome.interrupted = True
    return outcome

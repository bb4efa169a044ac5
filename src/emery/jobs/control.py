"""The engine's link to the outside while it runs: control requests and heartbeats.

``StopRequest`` holds the first pause or cancel asked for the run, from any thread (or a
signal handler), and cancels the running search task at once. ``ControlWatcher``, a
background thread, reads the job row every ``poll_s`` seconds (and refreshes the owner's
heartbeat every ``heartbeat_s``); when another process asks for a pause or a cancel, or
the job is no longer this process's to run, it calls ``on_request`` once. A thread, not
a coroutine, so that a busy event loop neither delays the request nor lets the heartbeat
go stale. ``stop_job`` and ``fail_job`` end a run this process owns.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from emery.core.events import Event
from emery.store.protocol import Store
from emery.store.records import JobRecord

log = logging.getLogger(__name__)

LOST = "lost"

_REMOTE_REASONS = {
    "pause": "pause requested",
    "cancel": "cancel requested",
    LOST: "another process took the job over",
}


class StopRequest:
    """The pause or cancel asked for one run; the first request wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.action: str | None = None
        self.reason: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Future[Any] | None = None

    def ask(self, action: str, reason: str | None = None) -> None:
        """Ask for ``action`` (``"pause"``, ``"cancel"`` or ``LOST``) and cancel the task
        being watched; safe from any thread and from signal handlers."""
        with self._lock:
            if self.action is None:
                self.action, self.reason = action, reason
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    def ask_from_store(self, action: str) -> None:
        """``ask`` for an action read from the job row by a ``ControlWatcher``."""
        self.ask(action, _REMOTE_REASONS[action])

    def watch(self, task: asyncio.Future[Any] | None) -> None:
        """Cancel ``task`` (running on this thread's loop) on a request; None stops that.
        A request made before the task was watched cancels it at once."""
        self._loop = asyncio.get_running_loop() if task is not None else self._loop
        self._task = task
        if task is not None and self.action is not None:
            task.cancel()


def stop_job(
    store: Store, job_id: str, owner: str, action: str, reason: str | None
) -> tuple[JobRecord, list[Event]]:
    """Pause or cancel a job this owner runs (nothing when it is no longer its to stop)."""
    job = store.get_job(job_id)
    if action == LOST or job.state != "running" or job.owner != owner:
        return job, []
    target = "cancelled" if action == "cancel" else "paused"
    return store.transition(
        job_id,
        target,
        reason=reason,
        expect=["running"],
        fields={"requested_action": None, "owner": None, "stop_reason": reason},
    )


def fail_job(store: Store, job_id: str, owner: str, message: str) -> tuple[JobRecord, list[Event]]:
    """Fail a job this owner runs with ``message`` (nothing when it is no longer its)."""
    job = store.get_job(job_id)
    if job.state != "running" or job.owner != owner:
        return job, []
    return store.transition(
        job_id, "failed", reason=message, expect=["running"], fields={"error": message}
    )


class ControlWatcher:
    """Polls a job's row for a requested action; keeps the owner's heartbeat fresh."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        owner: str,
        on_request: Callable[[str], None],
        *,
        poll_s: float = 0.2,
        heartbeat_s: float = 2.0,
    ) -> None:
        self.store = store
        self.job_id = job_id
        self.owner = owner
        self.on_request = on_request
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"emery-control-{job_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(self.poll_s):
            try:
                if time.monotonic() - last_beat >= self.heartbeat_s:
                    job = self.store.heartbeat(self.job_id, self.owner)
                    last_beat = time.monotonic()
                else:
                    job = self.store.get_job(self.job_id)
            except Exception as exc:  # a locked or unreachable store: try again next tick
                log.warning("job %s: cannot read the job row: %s", self.job_id, exc)
                continue
            if job.state != "running" or job.owner != self.owner:
                action = LOST
            else:
                action = job.requested_action or ""
            if action in ("pause", "cancel", LOST):
                if not self._stop.is_set():
                    self.on_request(action)
                return

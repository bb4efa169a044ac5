"""The engine's link to the outside while it runs: control requests and heartbeats.

A background thread reads the job row every ``poll_s`` seconds (and refreshes the owner's
heartbeat every ``heartbeat_s``). When another process asks for a pause or a cancel, or
the job is no longer this process's to run, it calls ``on_request`` once. A thread, not
a coroutine, so that a busy event loop neither delays the request nor lets the heartbeat
go stale.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from emery.store.protocol import Store

log = logging.getLogger(__name__)

LOST = "lost"


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

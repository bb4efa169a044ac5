"""An SFT run's link to its job row: who owns it, its heartbeat, pause and cancel requests.

A thread reads the job row every ``poll_s`` seconds and refreshes the owner's heartbeat,
so that model loading and long steps neither hide a request nor look like a dead run; the
trainer reads ``requested`` between steps (the same row fields prompt jobs use: ``emery
jobs pause|cancel`` works for both).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import datetime
from pathlib import Path

from emery.store.protocol import Store

log = logging.getLogger(__name__)

STALE_AFTER_S = 30.0


def owner_id() -> str:
    """This process as a job owner: ``host:pid`` (as prompt jobs write it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_gone(owner: str | None, heartbeat_age_s: float | None) -> bool:
    """Whether the process that ran a job is gone: a dead pid on this host (a zombie, killed
    but not yet reaped, is dead), or no heartbeat for ``STALE_AFTER_S``."""
    host, _, pid = (owner or "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        else:
            if _zombie(int(pid)):
                return True
    return heartbeat_age_s is None or heartbeat_age_s >= STALE_AFTER_S


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


class JobControl:
    """Polls the job row for ``pause``/``cancel``; keeps the heartbeat fresh."""

    def __init__(self, store: Store, job_id: str, owner: str, *, poll_s: float = 0.5) -> None:
        self.store = store
        self.job_id = job_id
        self.owner = owner
        self.poll_s = poll_s
        self.requested: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"emery-sft-{job_id}", daemon=True)

    def ask(self, action: str) -> None:
        """Ask for ``pause`` or ``cancel`` from this process (the first request wins)."""
        if self.requested is None:
            self.requested = action

    def __enter__(self) -> JobControl:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                job = self.store.heartbeat(self.job_id, self.owner)
            except Exception as exc:  # a locked store: try again next tick
                log.warning("job %s: cannot read the job row: %s", self.job_id, exc)
                continue
            if job.state != "running" or job.owner != self.owner:
                self.ask("lost")
            elif job.requested_action in ("pause", "cancel"):
                self.ask(job.requested_action)
            if self.requested is not None:
                return


def heartbeat_age(heartbeat_at: datetime | None) -> float | None:
    """Seconds since a heartbeat (None without one)."""
    return None if heartbeat_at is None else time.time() - heartbeat_at.timestamp()

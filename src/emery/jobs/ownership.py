"""Which process runs a job: ``host:pid`` owners, heartbeats, and telling a dead owner."""

from __future__ import annotations

import os
import socket
import time

from emery.store.records import JobRecord

STALE_AFTER_S = 30.0


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

"""A job's events as Server-Sent Events: stored events after ``since`` in order, then new
ones as they are stored, until the job stops running (an ``end`` event says so).

Each event is ``id: SEQ``, ``event: KIND``, ``data: JSON``, so a browser's
``EventSource`` reconnecting with ``Last-Event-ID`` continues where it left off. A comment
line every ``keepalive_s`` keeps proxies from closing a quiet stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

from emery.core.events import Event
from emery.store.protocol import Store

LIVE_STATES = ("created", "queued", "running")


def sse_message(event: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE message (``data`` as one JSON line)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _poll(store: Store, job_id: str, since: int) -> tuple[str, list[Event]]:
    state = store.get_job(job_id).state  # read first: no event stored before it is missed
    return state, store.list_events(job_id, since=since, limit=500)


async def event_stream(
    store: Store,
    job_id: str,
    *,
    since: int = 0,
    poll_s: float = 0.25,
    keepalive_s: float = 15.0,
    timeout_s: float | None = None,
) -> AsyncIterator[bytes]:
    """The job's events after ``since`` as SSE messages, following it while it runs."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    while True:
        state, events = await anyio.to_thread.run_sync(_poll, store, job_id, since)
        for item in events:
            since = item.seq or since
            yield sse_message(item.kind, item.model_dump(mode="json"), item.seq)
        if events:
            quiet_since = time.monotonic()
            continue  # a full page may have more behind it
        if state not in LIVE_STATES:
            yield sse_message("end", {"state": state, "last_seq": since})
            return
        if deadline is not None and time.monotonic() >= deadline:
            return
        if time.monotonic() - quiet_since >= keepalive_s:
            quiet_since = time.monotonic()
            yield b": keepalive\n\n"
        await anyio.sleep(poll_s)

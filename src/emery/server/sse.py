"""A job's events as Server-Sent Events: stored events after ``since`` in order, then new
ones as they are stored, until the job stops running (an ``end`` event says so).

Each event is ``id: SEQ``, ``event: KIND``, ``data: JSON``, so a browser's
``EventSource`` reconnecting with ``Last-Event-ID`` continues where it left off. A comment
line every ``keepalive_s`` keeps proxies from closing a quiet stream.

Every stream of one job in one server shares one ``JobFeed``: the job's state and new
events are read from the store once per ``poll_s`` for all of them (whichever stream
asks first reads; the others take what it read), and the feed keeps the newest
``FEED_EVENTS`` events, each encoded once; a stream writes all the events at hand as one
chunk. A stream behind what the feed keeps (a new follower's history)
reads those events from the store itself. Before, each stream polled the store on its
own: 200 followers made 800 reads a second, and the API's calls waited behind them for
the threads (about 10 s at the median on 2 cores, ``benchmarks/reliability/
load.py``).
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from emery.core.events import Event
from emery.store.protocol import Store

LIVE_STATES = ("created", "queued", "running")
FEED_EVENTS = 2000
"""The newest events a job's feed keeps for its streams."""
PAGE = 500


def sse_message(event: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE message (``data`` as one JSON line)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def event_message(event: Event) -> bytes:
    """A stored event's SSE message (its kind as the event name, its sequence as the id)."""
    return sse_message(event.kind, event.model_dump(mode="json"), event.seq)


def _poll(store: Store, job_id: str, since: int) -> tuple[str, list[Event]]:
    """The job's state, then every event after ``since``: read in this order, no event
    stored before the state was read is missed."""
    state = store.get_job(job_id).state
    events: list[Event] = []
    while True:
        page = store.list_events(job_id, since=since, limit=PAGE)
        events.extend(page)
        if len(page) < PAGE:
            return state, events
        since = page[-1].seq or since


class JobFeed:
    """One job's state and newest events, read from the store at most once per
    ``poll_s`` however many streams follow it."""

    def __init__(self, store: Store, job_id: str, poll_s: float) -> None:
        self.store, self.job_id, self.poll_s = store, job_id, poll_s
        self.state: str | None = None
        self.base = 0
        """The feed holds every event after this sequence number, up to ``last``."""
        self.last = 0
        self.seqs: list[int] = []
        self.messages: list[bytes] = []
        """Each held event's sequence number and its SSE message, encoded once for all."""
        self.polled_at = float("-inf")
        self.followers = 0
        self._lock = anyio.Lock()

    async def refresh(self) -> None:
        """Read the store when the last read is ``poll_s`` old (one reader at a time)."""
        async with self._lock:
            if time.monotonic() - self.polled_at < self.poll_s:
                return
            state, events = await anyio.to_thread.run_sync(
                _poll, self.store, self.job_id, self.last
            )
            self.polled_at = time.monotonic()
            self.state = state
            for event in events:
                self.seqs.append(event.seq or 0)
                self.messages.append(event_message(event))
            self.last = self.seqs[-1] if self.seqs else self.last
            extra = len(self.seqs) - FEED_EVENTS
            if extra > 0:
                self.base = self.seqs[extra - 1]
                del self.seqs[:extra], self.messages[:extra]

    def after(self, since: int) -> tuple[bytes, int]:
        """The messages of the events the feed holds after ``since`` (at least ``base``),
        as one chunk, and the last one's sequence number (``since`` when none)."""
        start = bisect.bisect_right(self.seqs, since)
        if start == len(self.seqs):
            return b"", since
        return b"".join(self.messages[start:]), self.seqs[-1]


_feeds: dict[tuple[int, int, str], JobFeed] = {}
_feeds_lock = threading.Lock()


@contextmanager
def _following(store: Store, job_id: str, poll_s: float) -> Iterator[JobFeed]:
    """The job's feed in this event loop (made by its first follower, dropped after its
    last)."""
    key = (id(asyncio.get_running_loop()), id(store), job_id)
    with _feeds_lock:
        feed = _feeds.get(key)
        if feed is None:
            feed = _feeds[key] = JobFeed(store, job_id, poll_s)
        feed.followers += 1
    try:
        yield feed
    finally:
        with _feeds_lock:
            feed.followers -= 1
            if feed.followers == 0 and _feeds.get(key) is feed:
                del _feeds[key]


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
    with _following(store, job_id, poll_s) as feed:
        while True:
            await feed.refresh()
            if since < feed.base:  # older than what the feed keeps: from the store
                read = functools.partial(store.list_events, job_id, since=since, limit=PAGE)
                events = await anyio.to_thread.run_sync(read)
                chunk = b"".join(event_message(e) for e in events)
                last = (events[-1].seq or since) if events else since
            else:
                chunk, last = feed.after(since)
            if chunk:  # every event at hand in one write
                since = last
                yield chunk
                quiet_since = time.monotonic()
                continue  # more may be behind them
            if feed.state not in LIVE_STATES and since >= feed.last:
                yield sse_message("end", {"state": feed.state, "last_seq": since})
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            if time.monotonic() - quiet_since >= keepalive_s:
                quiet_since = time.monotonic()
                yield b": keepalive\n\n"
            await anyio.sleep(poll_s)

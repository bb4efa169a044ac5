"""Every SSE stream of one job shares one feed (``server/sse.py``): the store is read once
per poll however many follow the job, and each stream still gets every event in order,
once, then ``end`` (a late follower's history from the store when the feed has let it
go)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from emery.core.events import Event
from emery.server import sse
from emery.store import MemoryStore
from emery.store.records import NewJob

POLL_S = 0.02


class CountingStore:
    """A store that counts the job reads a stream makes."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.job_reads = 0

    def get_job(self, job_id: str) -> Any:
        self.job_reads += 1
        return self.store.get_job(job_id)

    def list_events(self, job_id: str, **kwargs: Any) -> list[Event]:
        return self.store.list_events(job_id, **kwargs)


def running_job(store: MemoryStore) -> str:
    store.create_job(NewJob(id="j-feed", name="feed", algorithm="gepa", config={}))
    store.transition("j-feed", "queued")
    store.transition("j-feed", "running")
    return "j-feed"


async def follow(store: Any, job_id: str, since: int = 0) -> tuple[list[int], dict[str, Any]]:
    """Every event id of one stream, and its ``end`` event's data."""
    seqs: list[int] = []
    end: dict[str, Any] = {}
    stream = sse.event_stream(store, job_id, since=since, poll_s=POLL_S)
    async for chunk in stream:
        for message in chunk.decode().split("\n\n"):
            head, _, rest = message.partition("\n")
            if head.startswith("id: "):
                seqs.append(int(head[4:]))
            elif head == "event: end":
                end = json.loads(rest.removeprefix("data: "))
    return seqs, end


async def write(store: MemoryStore, job_id: str, n: int, every_s: float) -> None:
    for i in range(n):
        store.append_events(job_id, [Event(kind="note", data={"i": i})])
        await asyncio.sleep(every_s)
    store.transition(job_id, "succeeded")


def test_fifty_streams_of_a_running_job_read_the_store_once_per_poll() -> None:
    memory = MemoryStore()
    job_id = running_job(memory)
    store = CountingStore(memory)

    async def run() -> tuple[float, list[tuple[list[int], dict[str, Any]]]]:
        began = time.monotonic()
        *seen, _ = await asyncio.gather(
            *(follow(store, job_id) for _ in range(50)), write(memory, job_id, 40, 0.005)
        )
        return time.monotonic() - began, seen  # type: ignore[return-value]

    elapsed, seen = asyncio.run(run())
    stored = [e.seq for e in memory.list_events(job_id)]
    for seqs, end in seen:
        assert seqs == stored
        assert end == {"state": "succeeded", "last_seq": stored[-1]}
    # one read per poll for all fifty (each stream on its own: fifty per poll)
    assert store.job_reads <= elapsed / POLL_S + 2
    assert not sse._feeds  # the feed went with its last follower


def test_a_late_follower_gets_the_history_the_feed_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "FEED_EVENTS", 5)
    memory = MemoryStore()
    job_id = running_job(memory)

    async def run() -> list[tuple[list[int], dict[str, Any]]]:
        first = asyncio.create_task(follow(memory, job_id))
        writer = asyncio.create_task(write(memory, job_id, 30, 0.004))
        while len(memory.list_events(job_id)) < 20:
            await asyncio.sleep(0.01)
        late = await follow(memory, job_id)
        await writer
        return [await first, late]

    stored = [e.seq for e in memory.list_events(job_id)]
    for seqs, end in asyncio.run(run()):
        stored = [e.seq for e in memory.list_events(job_id)]
        assert seqs == stored
        assert end["last_seq"] == stored[-1]

"""How few requests a runner over HTTP sends (issue 49): span batches ride on the next
queue request, a lease renewed moments ago is not renewed again, and the server expires
leases on a claim at most every ``EXPIRE_EVERY_S`` per job."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import pytest
from fastapi.testclient import TestClient

from emery.core.rollouts import Rollout, RolloutConfig
from emery.core.spans import SpanRecord
from emery.server.api import create_server_app
from emery.server.queue_api import Expiry
from emery.store import MemoryStore, NewJob
from emery.store.queue import queue_metadata
from emery.store.records import RolloutEnd, SpanFilter
from emery.workers import http_queue
from emery.workers.http_queue import RENEW_FRACTION, HttpQueue

JOB = "job-http-1"
LEASE_S = 8.0
ENDED = RolloutEnd(
    status="succeeded", attempt_status="succeeded", output="ok", score=1.0, result={"score": 1.0}
)


class Counted:
    """An ``HttpQueue`` over an in-process server, with the paths it requested (and the
    JSON bodies it sent)."""

    def __init__(self, store: MemoryStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.paths: list[str] = []
        self.bodies: list[Any] = []
        client = TestClient(create_server_app(store))
        client.event_hooks["request"] = [self._seen]
        self.queue = HttpQueue("http://testserver", client=cast(httpx.Client, client), clock=clock)

    def _seen(self, request: httpx.Request) -> None:
        self.paths.append(request.url.path.removeprefix("/api/queue"))
        self.bodies.append(json.loads(request.content) if request.content else None)


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    store = MemoryStore()
    store.create_job(NewJob(id=JOB, name=JOB, algorithm="gepa", config={}))
    store.transition(JOB, "queued")
    store.transition(JOB, "running")
    store.add_rollouts(
        [
            Rollout(
                job_id=JOB,
                candidate_id="c1",
                example_id=f"e{i}",
                split="val",
                input={"question": f"q{i}"},
                config=RolloutConfig(max_attempts=2),
                metadata=queue_metadata("candidate:c1", 1, LEASE_S),
            )
            for i in range(2)
        ]
    )
    yield store
    store.close()


def spans(rollout: Rollout, attempt: str, first: int = 0) -> list[SpanRecord]:
    at = datetime.now(UTC)
    return [
        SpanRecord(
            trace_id="t" * 32,
            span_id=f"{i:016x}",
            name="emery.lm",
            start_time=at,
            end_time=at,
            attributes={"tokens": 12},
            job_id=JOB,
            rollout_id=rollout.id,
            attempt_id=attempt,
            sequence=first + i,
        )
        for i in range(3)
    ]


def finish(queue: HttpQueue, rollout: Rollout, attempt: str) -> bool:
    return queue.finish_rollout(rollout.id, attempt, ENDED)


def stored_spans(store: MemoryStore, attempt: str) -> int:
    return store.list_spans(SpanFilter(attempt_id=attempt)).total


def test_an_attempts_spans_ride_on_its_finish(store: MemoryStore) -> None:
    counted = Counted(store)
    rollout = counted.queue.claim_rollout("w1", job_id=JOB)
    assert rollout is not None
    attempt = f"{rollout.id}:1"
    counted.queue.add_traces([], [], spans(rollout, attempt))
    assert counted.paths == ["/claim"]  # held, not sent
    assert stored_spans(store, attempt) == 0
    assert finish(counted.queue, rollout, attempt)
    assert counted.paths == ["/claim", "/finish"]
    assert stored_spans(store, attempt) == 3
    assert store.get_rollout(rollout.id).status == "succeeded"


def test_a_refused_batch_is_dropped_and_the_finish_kept(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    counted = Counted(store)
    rollout = counted.queue.claim_rollout("w1", job_id=JOB)
    assert rollout is not None
    attempt = f"{rollout.id}:1"
    counted.queue.add_traces([], [], spans(rollout, attempt, first=2**70))  # over 64 bits
    with caplog.at_level(logging.WARNING, logger=http_queue.__name__):
        assert finish(counted.queue, rollout, attempt)
    assert "3 spans were not stored" in caplog.text
    assert "a number in the traces is too large" in caplog.text
    assert counted.paths == ["/claim", "/finish", "/finish"]  # sent again without them
    assert stored_spans(store, attempt) == 0
    assert store.get_rollout(rollout.id).status == "succeeded"


def test_close_sends_the_batches_held_alone(store: MemoryStore) -> None:
    counted = Counted(store)
    rollout = counted.queue.claim_rollout("w1", job_id=JOB)
    assert rollout is not None
    counted.queue.add_traces([], [], spans(rollout, f"{rollout.id}:1"))
    counted.queue.close()
    assert counted.paths == ["/claim", "/traces"]
    assert stored_spans(store, f"{rollout.id}:1") == 3


def test_a_full_outbox_is_sent_at_once(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_queue, "OUTBOX_ITEMS", 5)
    counted = Counted(store)
    rollout = counted.queue.claim_rollout("w1", job_id=JOB)
    assert rollout is not None
    counted.queue.add_traces([], [], spans(rollout, f"{rollout.id}:1"))
    assert counted.paths == ["/claim"]
    counted.queue.add_traces([], [], spans(rollout, f"{rollout.id}:1"))  # 6 rows held
    assert counted.paths == ["/claim", "/traces"]


def test_a_lease_renewed_moments_ago_is_not_renewed_again(store: MemoryStore) -> None:
    clock = [1000.0]
    counted = Counted(store, clock=lambda: clock[0])
    rollout = counted.queue.claim_rollout("w1", job_id=JOB)
    assert rollout is not None
    attempt = f"{rollout.id}:1"
    assert counted.queue.heartbeat_attempt(attempt)
    assert counted.paths == ["/claim"]  # the claim's lease is fresh
    clock[0] += LEASE_S / RENEW_FRACTION
    assert counted.queue.heartbeat_attempt(attempt)
    assert counted.paths == ["/claim", "/attempts/heartbeat"]
    clock[0] += LEASE_S / RENEW_FRACTION / 2
    assert counted.queue.heartbeat_attempt(attempt)  # renewed just now
    assert counted.paths == ["/claim", "/attempts/heartbeat"]
    assert finish(counted.queue, rollout, attempt)
    assert not counted.queue.heartbeat_attempt(attempt)  # asked: the attempt has ended
    assert counted.paths[-1] == "/attempts/heartbeat"


def test_an_unknown_attempt_is_always_asked_about(store: MemoryStore) -> None:
    counted = Counted(store)
    assert not counted.queue.heartbeat_attempt("nobody:1")
    assert counted.paths == ["/attempts/heartbeat"]


def test_leases_are_expired_at_most_every_period_per_job() -> None:
    clock = [50.0]
    expiry = Expiry(every_s=0.5, clock=lambda: clock[0])
    assert expiry.due("a")
    assert not expiry.due("a")
    assert expiry.due("b")  # another job's leases
    assert expiry.due(None)
    clock[0] += 0.49
    assert not expiry.due("a")
    clock[0] += 0.01
    assert expiry.due("a")


def test_a_finish_claims_the_next_rollout_in_one_request(store: MemoryStore) -> None:
    counted = Counted(store)
    rollout = counted.queue.claim_rollout("w1", job_id=JOB)
    assert rollout is not None
    kept, nxt = counted.queue.finish_and_claim(
        rollout.id, f"{rollout.id}:1", ENDED, worker_id="w1", job_id=JOB
    )
    assert kept
    assert nxt is not None
    assert nxt.id != rollout.id
    assert counted.paths == ["/claim", "/finish"]
    assert counted.queue.heartbeat_attempt(f"{nxt.id}:1")  # its lease is fresh: no request
    assert counted.paths == ["/claim", "/finish"]
    assert store.get_rollout(rollout.id).status == "succeeded"


def test_a_resource_version_is_fetched_once(store: MemoryStore) -> None:
    store.put_resource("candidate:c1", {"components": {}}, kind="candidate")
    counted = Counted(store)
    for _ in range(3):
        assert counted.queue.get_resource("candidate:c1", 1).version == 1
    assert counted.paths == ["/resource"]


def test_an_attempt_whose_id_is_not_its_rollout_and_number_is_refused(
    store: MemoryStore,
) -> None:
    """(rollout, number) names one attempt: a batch that gives it another id is a 422, never
    a stored conflict answered 500 (what the schema fuzz found)."""
    from emery.core.rollouts import Attempt

    with pytest.raises(ValueError, match="must be 'r1:1'"):
        Attempt(id="r1:2", rollout_id="r1", number=1)
    client = TestClient(create_server_app(store))
    rollout = store.list_rollouts().items[0]
    body = {"attempts": [{"id": "other", "rollout_id": rollout.id, "number": 1}]}
    answer = client.post("/api/queue/traces", json=body)
    assert answer.status_code == 422, answer.text
    assert store.list_attempts(rollout.id) == []


def test_a_finish_keeps_its_flat_wire_format(store: MemoryStore) -> None:
    """A finish's body carries the end's fields flat beside the ids (``RolloutEnd`` is not
    nested), and a body as an older runner sends it is stored as before."""
    counted = Counted(store)
    first = counted.queue.claim_rollout("w1", job_id=JOB)
    assert first is not None
    kept, second = counted.queue.finish_and_claim(
        first.id, f"{first.id}:1", ENDED, worker_id="w1", job_id=JOB
    )
    assert kept
    assert second is not None
    assert counted.bodies[-1] == {
        "rollout_id": first.id,
        "attempt_id": f"{first.id}:1",
        "status": "succeeded",
        "attempt_status": "succeeded",
        "error": None,
        "output": "ok",
        "score": 1.0,
        "result": {"score": 1.0},
        "claim": {"worker_id": "w1", "job_id": JOB},
    }
    older = {  # no claim, and only the fields a finish needs
        "rollout_id": second.id,
        "attempt_id": f"{second.id}:1",
        "status": "failed",
        "attempt_status": "timeout",
        "error": "ran out of time",
    }
    answer = TestClient(create_server_app(store)).post("/api/queue/finish", json=older)
    assert answer.json() == {"kept": True}
    stored = store.get_rollout(second.id)
    assert (stored.status, stored.error, stored.score, stored.output) == (
        "failed",
        "ran out of time",
        None,
        None,
    )
    assert [a.status for a in store.list_attempts(second.id)] == ["timeout"]

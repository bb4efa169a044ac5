"""The write-behind buffer for live trace rows: the newest state per rollout and attempt,
batches written off the caller's thread, ``flush`` on demand, no thread while idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.tracing.write_behind import WriteBehind


class Batches:
    """A ``write`` that keeps every batch (as statuses and span ids) and its thread."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.batches: list[tuple[list[str], list[str], list[str]]] = []
        self.threads: list[str] = []
        self.written = threading.Event()

    def __call__(
        self,
        rollouts: Sequence[Rollout],
        attempts: Sequence[Attempt],
        spans: Sequence[SpanRecord],
    ) -> None:
        self.threads.append(threading.current_thread().name)
        self.batches.append(
            (
                [f"{r.id}={r.status}" for r in rollouts],
                [f"{a.id}={a.status}" for a in attempts],
                [s.span_id for s in spans],
            )
        )
        self.written.set()
        if self.fail:
            raise OSError("disk full")


def record(span_id: str) -> SpanRecord:
    at = datetime.now(UTC)
    return SpanRecord(trace_id="t" * 32, span_id=span_id, name="s", start_time=at, end_time=at)


def writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "emery-trace-writer"]


def test_the_newest_state_of_each_rollout_is_written_once_per_batch() -> None:
    write = Batches()
    buffer = WriteBehind(write, max_delay_s=3600)
    rollout = Rollout(id="ro-1", candidate_id="c", example_id="e")
    attempt = Attempt(rollout_id="ro-1", number=1)
    buffer.rollout(rollout)
    rollout.move("preparing")
    buffer.rollout(rollout)
    buffer.attempt(attempt)
    attempt.move("running")
    buffer.attempt(attempt)
    buffer.spans([record("s1"), record("s2")])
    assert buffer.pending == 4
    buffer.flush()
    assert write.batches == [(["ro-1=preparing"], ["ro-1:1=running"], ["s1", "s2"])]
    assert write.threads == [threading.current_thread().name]  # flush writes in the caller
    assert buffer.pending == 0
    buffer.flush()  # nothing pending: nothing written
    assert len(write.batches) == 1


def test_batches_are_written_in_the_background_and_the_thread_ends_when_idle() -> None:
    write = Batches()
    buffer = WriteBehind(write, max_delay_s=0.05)
    buffer.spans([record("s1")])
    assert write.written.wait(5.0)
    assert write.batches == [([], [], ["s1"])]
    assert write.threads == ["emery-trace-writer"]
    deadline = time.monotonic() + 5.0
    while writer_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not writer_threads()
    buffer.spans([record("s2")])  # a new item starts a new writer
    buffer.flush()
    assert [b[2] for b in write.batches] == [["s1"], ["s2"]]


def test_a_full_batch_is_written_before_its_delay() -> None:
    write = Batches()
    buffer = WriteBehind(write, max_batch=3, max_delay_s=3600)
    buffer.spans([record("s1")])
    buffer.spans([record("s2"), record("s3")])
    assert write.written.wait(5.0)
    assert write.batches[0][2] == ["s1", "s2", "s3"]


def test_a_failing_write_loses_its_batch_but_not_the_buffer() -> None:
    write = Batches(fail=True)
    buffer = WriteBehind(write, max_delay_s=3600)
    buffer.spans([record("s1")])
    buffer.flush()  # logged, not raised
    write.fail = False
    buffer.spans([record("s2")])
    buffer.flush()
    assert [b[2] for b in write.batches] == [["s1"], ["s2"]]

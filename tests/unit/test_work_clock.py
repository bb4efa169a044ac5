"""The attempt's own clock: time waiting on an in-process model does not count."""

from __future__ import annotations

import asyncio

from emery.core.work_clock import WorkClock, keeping_time, waiting_on_model


class Now:
    """A hand-moved monotonic time."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_clock_stands_still_while_any_model_wait_is_in_flight() -> None:
    now = Now()
    clock = WorkClock(now)
    now.t += 2  # own work
    clock.hold()
    now.t += 5
    clock.hold()  # a second concurrent call of the same attempt
    now.t += 5
    clock.release()
    now.t += 5  # the first call still waits
    assert clock.held
    assert clock.elapsed() == 2
    clock.release()
    now.t += 1
    assert not clock.held
    assert clock.elapsed() == 3


async def test_waits_in_tasks_and_threads_hold_the_clock_that_was_current() -> None:
    now = Now()
    clock = WorkClock(now)

    def wait_in_a_thread() -> float:
        with waiting_on_model():
            now.t += 10
            return clock.elapsed()

    async def wait_in_a_task() -> None:
        with waiting_on_model():
            now.t += 10
            assert await asyncio.to_thread(wait_in_a_thread) == 0

    with keeping_time(clock):
        task = asyncio.ensure_future(wait_in_a_task())
    await task
    with waiting_on_model():  # outside: no clock to hold
        now.t += 1
    assert clock.elapsed() == 1

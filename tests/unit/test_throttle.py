"""A model's shared pace: requests and tokens per minute held under 32 concurrent callers,
concurrency that halves on a rate limit and grows back, one model's throttle shared by
every user of it, and the rate-limit line a watcher hears."""

from __future__ import annotations

import asyncio

import pytest

from emery.lm import throttle as throttle_module
from emery.lm.throttle import Pace, SlotGate, Throttle, rate_notices, throttle_for


class FixedTime:
    """A clock that stands still; sleeps are recorded (the schedule is what is tested)."""

    def __init__(self) -> None:
        self.now = 50.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


def most_in_any_window(times: list[float], window: float) -> float:
    """The most units sent in any ``window`` seconds."""
    times = sorted(times)
    start, best = 0, 0
    for end, moment in enumerate(times):
        while moment - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


async def test_requests_per_minute_hold_under_32_concurrent_callers() -> None:
    time = FixedTime()
    throttle = Throttle("openai/m", 32, requests_per_minute=600, clock=time.clock, sleep=time.sleep)
    sent: list[float] = []

    async def call() -> None:
        for _ in range(10):
            before = len(sent)
            wait = throttle._requests.reserve(1, time.now)  # type: ignore[union-attr]
            sent.append(time.now + wait)
            assert len(sent) == before + 1

    await asyncio.gather(*(call() for _ in range(32)))
    assert len(sent) == 320
    # 600 a minute is one every 0.1 s, after a burst of one second's worth
    assert most_in_any_window(sent, 1.0) <= 10 + 10 + 1
    assert most_in_any_window(sent, 60.0) <= 600 + 10 + 1
    assert max(sent) - time.now == pytest.approx((320 - 11) * 0.1, abs=0.11)


async def test_tokens_per_minute_hold_and_settle_with_the_tokens_used() -> None:
    pace = Pace(6000)  # 100 a second
    now = 0.0
    starts = [now + pace.reserve(500, now) for _ in range(20)]  # 10,000 tokens estimated
    assert starts[-1] == pytest.approx(19 * 5.0 - 1.0)  # 5 s each, a second of burst
    pace.settle(500, 100)  # the call used 100: 4 s of the schedule come back
    assert now + pace.reserve(1, now) == pytest.approx(19 * 5.0 - 1.0 + 5.0 - 4.0)


async def test_admit_paces_every_call_of_32_concurrent_callers() -> None:
    time = FixedTime()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    throttle = Throttle("openai/m", 32, requests_per_minute=120, clock=time.clock, sleep=sleep)

    async def call() -> None:
        ticket = await throttle.admit(10)
        throttle.done(ticket, used_tokens=10)

    await asyncio.gather(*(call() for _ in range(32)))
    assert sorted(waits) == pytest.approx([0.5 * k - 1.0 for k in range(3, 32)])


async def test_concurrency_halves_on_a_rate_limit_and_grows_back() -> None:
    gate = SlotGate(8)
    for _ in range(8):
        await gate.acquire()
    gate.shrink()
    assert gate.limit == 4.0
    for _ in range(8):
        gate.release()
    waiting = asyncio.gather(*(gate.acquire() for _ in range(6)))
    await asyncio.sleep(0.01)
    assert gate.in_flight == 4  # two wait for a slot
    for _ in range(4):
        gate.release(succeeded=True)
    await waiting
    assert gate.in_flight == 2  # the two that waited
    assert 4.0 < gate.limit <= 5.0  # one more per `limit` successes
    for _ in range(2):
        gate.release(succeeded=True)
    assert gate.in_flight == 0


async def test_a_cancelled_waiter_gives_its_slot_back() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    waiter = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    gate.release()  # granted to the waiter...
    waiter.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0)
    assert gate.in_flight == 0
    await asyncio.wait_for(gate.acquire(), 1.0)


async def test_a_cool_down_holds_every_call_and_is_heard_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(throttle_module, "NOTICE_AFTER_S", 0.0)
    time = FixedTime()
    heard: list[str] = []

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(0.02)
        time.now += seconds

    throttle = Throttle("openai/m", 4, clock=time.clock, sleep=sleep)
    ticket = await throttle.admit(1)
    throttle.limited(20.0)
    sent: list[float] = []

    async def call() -> None:
        admitted = await throttle.admit(1)
        sent.append(time.now)
        throttle.done(admitted, used_tokens=None)

    with rate_notices(heard.append):
        await asyncio.gather(*(call() for _ in range(3)))
    assert min(sent) >= 70.0  # every call waited out the 20 s
    assert heard == ["rate-limited by openai/m: 3 calls waiting 20 s"]  # one line, not three
    assert throttle.gate.limit < 4  # fewer at once after a rate limit
    assert (throttle.stats.rate_limited, throttle.gate.in_flight) == (1, 0)
    assert ticket.tokens == 0.0  # no tokens-per-minute pace: nothing reserved


def test_one_model_has_one_throttle_whose_limits_only_tighten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(throttle_module, "_registry", {})
    key = ("openai", "http://x/v1", "m", "k")
    first = throttle_for(key, "openai/m", concurrency=8, requests_per_minute=100)
    second = throttle_for(key, "openai/m", concurrency=2, requests_per_minute=60)
    third = throttle_for(key, "openai/m", concurrency=2, requests_per_minute=500)
    assert first is second is third
    assert first.requests_per_minute == 60
    other_key = throttle_for(("openai", "http://x/v1", "m", "k2"), "openai/m", concurrency=8)
    assert other_key is not first

"""Retries with exponential backoff and which errors count as transient."""

from __future__ import annotations

import random

import httpx2 as httpx  # the HTTP client the openai SDK is built on
import openai
import pytest

from emery.lm.openai_compat import is_transient
from emery.lm.retry import RetryPolicy, retrying


class Transient(Exception):
    pass


class Fatal(Exception):
    pass


class Flaky:
    """Fails with ``error`` ``failures`` times, then returns ``"ok"``."""

    def __init__(self, failures: int, error: type[Exception] = Transient) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, Transient)


POLICY = RetryPolicy(max_attempts=4, base_delay_s=1.0, max_delay_s=2.5)


async def test_transient_errors_are_retried_until_success() -> None:
    call, sleep = Flaky(2), Sleeps()
    result = await retrying(
        call, policy=POLICY, is_transient=_transient, rng=random.Random(0), sleep=sleep
    )
    assert result == "ok"
    assert call.calls == 3
    assert len(sleep.delays) == 2


async def test_gives_up_after_max_attempts_with_bounded_backoff() -> None:
    call, sleep = Flaky(100), Sleeps()
    with pytest.raises(Transient, match="failure 4"):
        await retrying(
            call, policy=POLICY, is_transient=_transient, rng=random.Random(1), sleep=sleep
        )
    assert call.calls == 4
    assert len(sleep.delays) == 3
    bounds = [1.0, 2.0, 2.5]  # base * 2**(attempt-1), capped at max_delay_s
    for delay, bound in zip(sleep.delays, bounds, strict=True):
        assert 0.0 <= delay <= bound


async def test_delays_are_reproducible_for_a_seed() -> None:
    delays = []
    for _ in range(2):
        sleep = Sleeps()
        with pytest.raises(Transient):
            await retrying(
                Flaky(100),
                policy=POLICY,
                is_transient=_transient,
                rng=random.Random(7),
                sleep=sleep,
            )
        delays.append(sleep.delays)
    assert delays[0] == delays[1]
    assert len(set(delays[0])) == 3


async def test_non_transient_error_is_raised_immediately() -> None:
    call, sleep = Flaky(1, Fatal), Sleeps()
    with pytest.raises(Fatal):
        await retrying(call, policy=POLICY, is_transient=_transient, sleep=sleep)
    assert call.calls == 1
    assert sleep.delays == []


def test_delay_grows_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=3.0)
    rng = random.Random(0)
    samples = {attempt: [policy.delay(attempt, rng) for _ in range(200)] for attempt in (1, 3, 10)}
    assert max(samples[1]) <= 0.5
    assert max(samples[3]) <= 2.0
    assert max(samples[10]) <= 3.0
    assert max(samples[10]) > 2.0
    assert min(min(s) for s in samples.values()) >= 0.0


REQUEST = httpx.Request("POST", "http://localhost/v1/chat/completions")


def _status_error(status: int) -> openai.APIStatusError:
    response = httpx.Response(status, request=REQUEST)
    return openai.APIStatusError(f"status {status}", response=response, body=None)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            openai.RateLimitError(
                "slow down", response=httpx.Response(429, request=REQUEST), body=None
            ),
            True,
        ),
        (
            openai.InternalServerError(
                "boom", response=httpx.Response(500, request=REQUEST), body=None
            ),
            True,
        ),
        (_status_error(503), True),
        (_status_error(599), True),
        (_status_error(408), True),
        (
            openai.BadRequestError("bad", response=httpx.Response(400, request=REQUEST), body=None),
            False,
        ),
        (_status_error(401), False),
        (_status_error(404), False),
        (openai.APITimeoutError(request=REQUEST), True),
        (openai.APIConnectionError(request=REQUEST), True),
        (ValueError("not an API error"), False),
    ],
)
def test_is_transient(error: BaseException, expected: bool) -> None:
    assert is_transient(error) is expected

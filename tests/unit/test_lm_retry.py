"""How a hosted model's call is sent again: errors read as their provider means them, a
rate limit waited out as long as asked (on a fake clock), passing faults retried with
bounded backoff, refusals and rejections never retried."""

from __future__ import annotations

import random
from collections.abc import Mapping

import httpx2 as httpx  # the HTTP client the openai SDK is built on
import openai
import pytest

from emery.lm.base import Completion, LMError, TokenUsage
from emery.lm.provider_errors import (
    MalformedReply,
    ProviderRefused,
    ProviderUnavailable,
    classify,
    duration_s,
    requested_wait,
)
from emery.lm.retry import RetryPolicy, send_call
from emery.lm.throttle import Throttle

REQUEST = httpx.Request("POST", "http://localhost/v1/chat/completions")
POLICY = RetryPolicy(max_attempts=4, base_delay_s=1.0, max_delay_s=2.5, max_wait_s=600.0)


class FakeTime:
    """A clock that moves only when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def status_error(
    status: int, headers: Mapping[str, str] | None = None, body: object = None
) -> openai.APIStatusError:
    response = httpx.Response(status, request=REQUEST, headers=dict(headers or {}))
    return openai.APIStatusError(f"status {status}", response=response, body=body)


class Script:
    """Raises the given errors in order, then answers."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.sent_at: list[float] = []

    def send(self, time: FakeTime):  # type: ignore[no-untyped-def]
        async def send() -> Completion:
            self.calls += 1
            self.sent_at.append(time.now)
            if self.errors:
                raise self.errors.pop(0)
            return Completion(text="ok", usage=TokenUsage(prompt_tokens=5, completion_tokens=2))

        return send


async def _send(script: Script, time: FakeTime, policy: RetryPolicy = POLICY) -> Completion:
    throttle = Throttle("openai/m", 4, clock=time.clock, sleep=time.sleep)
    return await send_call(
        script.send(time),
        name="openai/m",
        throttle=throttle,
        policy=policy,
        tokens=10,
        rng=random.Random(0),
        sleep=time.sleep,
    )


async def test_a_retry_after_is_waited_out_and_uses_no_attempt() -> None:
    time = FakeTime()
    limited = [status_error(429, {"retry-after": "20"}) for _ in range(6)]  # > max_attempts
    script = Script(*limited)
    completion = await _send(script, time)
    assert completion.text == "ok"
    assert script.calls == 7
    assert [b - a for a, b in zip(script.sent_at, script.sent_at[1:], strict=False)] == [20.0] * 6
    assert (completion.rate_limited, completion.rate_limit_wait_s) == (6, 120.0)


async def test_a_call_never_limited_reports_no_wait() -> None:
    completion = await _send(Script(status_error(500)), FakeTime())
    assert (completion.rate_limited, completion.rate_limit_wait_s) == (0, 0.0)


def test_the_meter_counts_rate_limit_waits_by_role() -> None:
    from emery.lm.usage import UsageMeter

    meter = UsageMeter()
    waited = Completion(text="ok", rate_limited=2, rate_limit_wait_s=3.5)
    meter.record("task", waited, 0.0)
    meter.record("task", Completion(text="ok"), 0.0)
    task = meter.by_role()["task"]
    assert (task.calls, task.rate_limited, task.rate_limit_wait_s) == (2, 2, 3.5)


async def test_retry_after_ms_and_reset_headers_set_the_wait() -> None:
    time = FakeTime()
    script = Script(
        status_error(429, {"retry-after-ms": "1500"}),
        status_error(
            429,
            {
                "x-ratelimit-remaining-requests": "3",
                "x-ratelimit-reset-requests": "2s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "6m0s",
            },
        ),
    )
    await _send(script, time)
    assert script.sent_at[1] - script.sent_at[0] == 1.5
    assert script.sent_at[2] - script.sent_at[1] == 360.0  # the used-up limit's reset


async def test_a_rate_limit_past_max_wait_pauses_instead_of_failing_a_rollout() -> None:
    time = FakeTime()
    script = Script(*(status_error(429, {"retry-after": "100"}) for _ in range(10)))
    policy = POLICY.model_copy(update={"max_wait_s": 250.0})
    with pytest.raises(ProviderUnavailable, match=r"max_wait_s is 250"):
        await _send(script, time, policy)
    assert script.calls == 3  # waited 100 + 100; a third 100 would pass 250


async def test_a_rate_limit_without_a_wait_backs_off_doubling() -> None:
    time = FakeTime()
    script = Script(*(status_error(429) for _ in range(4)))
    policy = POLICY.model_copy(update={"rate_limit_base_s": 1.0, "rate_limit_max_s": 4.0})
    await _send(script, time, policy)
    gaps = [b - a for a, b in zip(script.sent_at, script.sent_at[1:], strict=False)]
    for gap, ceiling in zip(gaps, [1.0, 2.0, 4.0, 4.0], strict=True):
        assert ceiling / 2 <= gap <= ceiling


async def test_passing_faults_are_retried_up_to_max_attempts_with_bounded_backoff() -> None:
    time = FakeTime()
    script = Script(*(status_error(500) for _ in range(10)))
    with pytest.raises(LMError, match="openai/m: 500"):
        await _send(script, time)
    assert script.calls == 4
    assert len(time.sleeps) == 3
    for delay, bound in zip(time.sleeps, [1.0, 2.0, 2.5], strict=True):
        assert 0.0 <= delay <= bound


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (status_error(401), "API key was refused"),
        (status_error(404), "no such model or endpoint"),
        (
            status_error(429, body={"error": {"code": "insufficient_quota", "message": "x"}}),
            "out of quota",
        ),
    ],
)
async def test_a_refusal_stops_at_once(error: BaseException, says: str) -> None:
    time = FakeTime()
    script = Script(error)
    with pytest.raises(ProviderRefused, match=says):
        await _send(script, time)
    assert script.calls == 1
    assert time.sleeps == []


async def test_a_rejected_request_fails_at_once() -> None:
    time = FakeTime()
    body = {"error": {"code": "context_length_exceeded", "message": "too long"}}
    script = Script(status_error(400, body=body))
    with pytest.raises(LMError, match="400 context_length_exceeded: too long"):
        await _send(script, time)
    assert script.calls == 1


def test_delay_grows_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=3.0)
    rng = random.Random(0)
    samples = {attempt: [policy.delay(attempt, rng) for _ in range(200)] for attempt in (1, 3, 10)}
    assert max(samples[1]) <= 0.5
    assert max(samples[3]) <= 2.0
    assert max(samples[10]) <= 3.0
    assert max(samples[10]) > 2.0
    assert min(min(s) for s in samples.values()) >= 0.0


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            openai.RateLimitError("slow", response=httpx.Response(429, request=REQUEST), body=None),
            "rate_limited",
        ),
        (status_error(503), "rate_limited"),
        (status_error(529), "rate_limited"),
        (status_error(400, body={"error": {"type": "overloaded_error"}}), "rate_limited"),
        (status_error(500), "transient"),
        (status_error(599), "transient"),
        (status_error(408), "transient"),
        (openai.APITimeoutError(request=REQUEST), "transient"),
        (openai.APIConnectionError(request=REQUEST), "transient"),
        (MalformedReply("not json"), "transient"),
        (status_error(401), "refused"),
        (status_error(403), "refused"),
        (status_error(404), "refused"),
        (status_error(400), "rejected"),
        (status_error(422), "rejected"),
        (ValueError("not an API error"), "rejected"),
    ],
)
def test_classify(error: BaseException, kind: str) -> None:
    assert classify(error).kind == kind


def test_a_reason_names_the_status_once() -> None:
    """Some providers put the status in the error's code too (LiteLLM's errors do)."""
    body = {"error": {"code": "429", "type": "rate_limit_error", "message": "slow down"}}
    assert classify(status_error(429, body=body)).reason == "429 rate_limit_error: slow down"
    body = {"error": {"code": 429, "message": "slow down"}}
    assert classify(status_error(429, body=body)).reason == "429: slow down"


def test_requested_wait_reads_every_header_a_provider_sends() -> None:
    now = 1_700_000_000.0
    assert requested_wait({"Retry-After": "20"}, now) == 20.0
    assert requested_wait({"retry-after-ms": "250", "retry-after": "20"}, now) == 0.25
    date = "Tue, 14 Nov 2023 22:13:40 GMT"  # now + 20 s
    assert requested_wait({"retry-after": date}, now) == pytest.approx(20.0)
    anthropic = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2023-11-14T22:13:50Z",
        "anthropic-ratelimit-tokens-remaining": "9000",
        "anthropic-ratelimit-tokens-reset": "2023-11-14T22:14:20Z",
    }
    assert requested_wait(anthropic, now) == pytest.approx(30.0)
    assert requested_wait({"x-ratelimit-reset-requests": "1m30.5s"}, now) == 90.5
    assert requested_wait({"content-type": "application/json"}, now) is None
    assert duration_s("250ms") == 0.25
    assert duration_s("1h2m3s") == 3723.0
    assert duration_s("soon") is None

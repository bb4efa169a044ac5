"""The provider simulator of ``benchmarks/providers`` limits like a hosted provider: a burst
over its request limit gets 429 with the rate-limit headers, a request within it an answer,
and its buckets refill continuously (issue 47, item 6)."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "providers"))

from simulator import Provider, ProviderSimulator, duration, estimated_tokens

QUIET = {"latency_median_s": 0.0, "error_rate": 0.0, "hang_rate": 0.0}


def body(content: str = "hi", max_tokens: int = 10) -> dict[str, object]:
    return {
        "model": "task",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
    }


def post(url: str, payload: dict[str, object]) -> tuple[int, dict[str, str], dict[str, object]]:
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_a_burst_over_the_request_limit_gets_429_with_the_headers() -> None:
    with ProviderSimulator(rpm=2, tpm=10_000, **QUIET) as server:
        answers = [post(server.base_url, body(f"q{i}")) for i in range(3)]
        summary = server.summary()
    (ok, ok_headers, reply), (second, _, _), (limited, headers, error) = answers
    assert (ok, second, limited) == (200, 200, 429)
    assert reply["choices"][0]["message"]["content"]  # type: ignore[index]
    assert ok_headers["x-ratelimit-limit-requests"] == "2"
    assert ok_headers["x-ratelimit-remaining-requests"] == "1"
    assert error["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["x-ratelimit-limit-tokens"] == "10000"
    assert 29 <= int(headers["retry-after"]) <= 30  # one request refills in 30 s
    assert 29_000 <= int(headers["retry-after-ms"]) <= 30_000
    for name in ("requests", "tokens"):
        assert f"x-ratelimit-remaining-{name}" in headers
        assert headers[f"x-ratelimit-reset-{name}"].endswith("s")
    assert (summary["requests"], summary["answered"], summary["429"]) == (3, 2, 1)


def test_the_buckets_refill_continuously_and_count_tokens_as_openai_estimates() -> None:
    now = [0.0]
    provider = Provider(rpm=60, tpm=1000, **QUIET, clock=lambda: now[0])
    big = body("x" * 400, max_tokens=400)  # 100 + 400 tokens
    assert estimated_tokens(big, 1024) == 500
    assert provider.admit(big, b"1").kind == "answer"
    assert provider.admit(big, b"2").kind == "answer"
    refused = provider.admit(big, b"3")
    assert refused.kind == "429"
    assert refused.retry_after_s == pytest.approx(30.0)  # 500 tokens at 1000 a minute
    assert refused.headers["x-ratelimit-reset-tokens"] == "1m0s"
    now[0] = 30.0
    assert provider.admit(big, b"3").kind == "answer"
    assert provider.summary()["tokens_charged"] == 1500


def test_reset_times_are_spelt_as_openai_spells_them() -> None:
    assert [duration(s) for s in (0, 0.25, 1, 1.5, 360, 3723)] == [
        "0s",
        "250ms",
        "1s",
        "1.5s",
        "6m0s",
        "1h2m3s",
    ]

"""A rate-limited provider: an OpenAI-compatible chat-completions endpoint on 127.0.0.1 that
answers like the scripted models (``reliability/mock_openai.py``'s ``completion``: the
request's ``model`` picks the script, ``reflection`` or the task model) and behaves like a
hosted provider under load:

- Per-minute limits per model, as OpenAI documents them: one token bucket per limit
  (requests, tokens) that refills continuously at ``limit / 60`` per second and holds
  ``burst_s`` seconds of it (default 60: the whole minute's limit). A request costs one
  request and its estimated tokens: the messages' characters / 4 (rounded up) plus its
  ``max_tokens`` (``max_completion_tokens``; ``default_max_tokens`` when it sends
  neither). A request that either bucket cannot pay for is answered at once with 429, a
  ``rate_limit_error`` body, ``retry-after`` (whole seconds, rounded up) and
  ``retry-after-ms`` (when both buckets will hold its cost), and is not charged. Every
  answer carries ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset: the
  time until the bucket is full again, as ``1s``, ``6m0s``, ``250ms``).
- Latency drawn from a lognormal (median ``latency_median_s``, 99th percentile
  ``latency_p99_s``, at most ``latency_max_s``).
- Faults among the admitted requests: ``error_rate`` answered 500 (after their latency),
  ``hang_rate`` held open ``hang_s`` (past the client's timeout) and then dropped without
  an answer.

The draws are seeded: each admitted request's by (``seed``, model, the request body, how
many identical bodies were admitted before it), so the same requests get the same
latencies and faults whatever order concurrent clients send them in. ``summary()``
counts what it did and the rate of answered requests per minute over the busy period
(first request to last answer), overall and per model.

Usage: python benchmarks/providers/simulator.py [--rpm 60] [--tpm 40000] [--seed 0]
       (prints its base_url, serves until interrupted, then prints its summary as JSON)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))

from mock_openai import completion  # the scripted models' answers

Z99 = 2.3263478740408408  # the standard normal's 99th percentile
CHARS_PER_TOKEN = 4


def duration(seconds: float) -> str:
    """``seconds`` as OpenAI spells a reset time (Go's duration format, to the
    millisecond): ``0s``, ``250ms``, ``1s``, ``1.5s``, ``6m0s``, ``1h2m3s``."""
    ms = max(0, math.ceil(seconds * 1000 - 1e-6))
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class Bucket:
    """One per-minute limit: ``per_minute`` units refilled continuously, at most
    ``burst_s`` seconds' worth held."""

    def __init__(self, per_minute: float, burst_s: float, now: float) -> None:
        self.limit = per_minute
        self.rate = per_minute / 60.0  # units per second
        self.capacity = self.rate * burst_s
        self.level = self.capacity
        self._at = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = max(self._at, now)

    def wait_s(self, cost: float) -> float:
        """Seconds until the bucket holds ``cost`` (infinite when it never can)."""
        if cost > self.capacity:
            return math.inf
        short = cost - self.level
        return short / self.rate if short > 1e-9 * max(1.0, cost) else 0.0

    def reset_s(self) -> float:
        """Seconds until the bucket is full again."""
        return (self.capacity - self.level) / self.rate


def estimated_tokens(body: dict[str, Any], default_max_tokens: int) -> int:
    """A request's cost against the token limit, as OpenAI estimates it before answering:
    its messages' characters / 4 plus the most it may write."""
    chars = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else message
        if isinstance(content, list):  # content parts
            parts = [part for part in content if isinstance(part, dict)]
            chars += sum(len(str(part.get("text", ""))) for part in parts)
        else:
            chars += len(str(content or ""))
    most = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    return math.ceil(chars / CHARS_PER_TOKEN) + int(most)


@dataclass
class Decision:
    """What to do with one request: ``kind`` is ``answer``, ``429``, ``500`` or ``hang``."""

    kind: str
    model: str
    headers: dict[str, str] = field(default_factory=dict)
    latency_s: float = 0.0
    retry_after_s: float = 0.0
    tokens: int = 0


@dataclass
class _Usage:
    """One model's traffic: requests, answers, and when it was first asked and last
    answered (monotonic seconds)."""

    counts: Counter[str] = field(default_factory=Counter)
    first_s: float | None = None
    last_s: float | None = None


class Provider:
    """The provider's behaviour without the HTTP: limits per model, latency and faults,
    and the counts. Thread-safe; ``clock`` is injectable for tests."""

    def __init__(
        self,
        *,
        rpm: float | None = None,
        tpm: float | None = None,
        burst_s: float = 60.0,
        latency_median_s: float = 0.3,
        latency_p99_s: float = 3.0,
        latency_max_s: float = 8.0,
        error_rate: float = 0.01,
        hang_rate: float = 0.005,
        hang_s: float = 30.0,
        default_max_tokens: int = 1024,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if latency_p99_s < latency_median_s:
            raise ValueError("latency_p99_s must be at least latency_median_s")
        self.rpm, self.tpm, self.burst_s = rpm, tpm, burst_s
        self.latency_median_s = latency_median_s
        self.latency_p99_s = latency_p99_s
        self.latency_max_s = latency_max_s
        self.error_rate, self.hang_rate, self.hang_s = error_rate, hang_rate, hang_s
        self.default_max_tokens = default_max_tokens
        self.seed = seed
        self.clock = clock
        self._mu = math.log(latency_median_s) if latency_median_s > 0 else None
        self._sigma = 0.0
        if self._mu is not None:
            self._sigma = math.log(latency_p99_s / latency_median_s) / Z99
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[Bucket | None, Bucket | None]] = {}
        self._seen: Counter[str] = Counter()
        self._usage: dict[str, _Usage] = {}

    def settings(self) -> dict[str, Any]:
        """The parameters it runs with."""
        return {
            "rpm": self.rpm,
            "tpm": self.tpm,
            "burst_s": self.burst_s,
            "latency_median_s": self.latency_median_s,
            "latency_p99_s": self.latency_p99_s,
            "latency_max_s": self.latency_max_s,
            "error_rate": self.error_rate,
            "hang_rate": self.hang_rate,
            "hang_s": self.hang_s,
            "default_max_tokens": self.default_max_tokens,
            "seed": self.seed,
        }

    def _limits(self, model: str, now: float) -> tuple[Bucket | None, Bucket | None]:
        if model not in self._buckets:
            self._buckets[model] = (
                Bucket(self.rpm, self.burst_s, now) if self.rpm else None,
                Bucket(self.tpm, self.burst_s, now) if self.tpm else None,
            )
        return self._buckets[model]

    @staticmethod
    def _headers(requests: Bucket | None, tokens: Bucket | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, bucket in (("requests", requests), ("tokens", tokens)):
            if bucket is not None:
                headers[f"x-ratelimit-limit-{name}"] = str(int(bucket.limit))
                headers[f"x-ratelimit-remaining-{name}"] = str(max(0, math.floor(bucket.level)))
                headers[f"x-ratelimit-reset-{name}"] = duration(bucket.reset_s())
        return headers

    def admit(self, body: dict[str, Any], raw: bytes) -> Decision:
        """Charge a request against its model's limits and draw its fate."""
        model = str(body.get("model") or "")
        cost = estimated_tokens(body, self.default_max_tokens)
        with self._lock:
            now = self.clock()
            usage = self._usage.setdefault(model, _Usage())
            usage.counts["requests"] += 1
            if usage.first_s is None:
                usage.first_s = now
            requests, tokens = self._limits(model, now)
            waits = []
            for bucket, units in ((requests, 1), (tokens, cost)):
                if bucket is not None:
                    bucket.refill(now)
                    waits.append(bucket.wait_s(units))
            wait = max(waits, default=0.0)
            if wait > 0:
                usage.counts["429"] += 1
                decision = Decision("429", model, retry_after_s=wait, tokens=cost)
                decision.headers = self._headers(requests, tokens)
                return decision
            for bucket, units in ((requests, 1), (tokens, cost)):
                if bucket is not None:
                    bucket.level -= units
            usage.counts["tokens_charged"] += cost
            digest = hashlib.sha256(raw).hexdigest()
            nth = self._seen[digest]
            self._seen[digest] += 1
            headers = self._headers(requests, tokens)
            rng = random.Random(f"{self.seed}:{model}:{digest}:{nth}")
            draw = rng.random()
            if draw < self.hang_rate:
                kind = "hang"
            elif draw < self.hang_rate + self.error_rate:
                kind = "500"
            else:
                kind = "answer"
            usage.counts[kind] += 1
        latency = 0.0
        if self._mu is not None:
            latency = min(self.latency_max_s, rng.lognormvariate(self._mu, self._sigma))
        return Decision(kind, model, headers, latency, tokens=cost)

    def answered(self, model: str, status: int) -> None:
        """A reply with ``status`` went out; a 200 counts as answered."""
        with self._lock:
            usage = self._usage.setdefault(model, _Usage())
            if status == 200:
                usage.counts["answered"] += 1
                usage.last_s = self.clock()

    def summary(self) -> dict[str, Any]:
        """What it did: counts (``requests``, ``answered``, ``429``, ``500``, ``hang``,
        ``tokens_charged``), the busy period and answered requests per minute over it,
        overall and per model."""
        with self._lock:
            models = {name: _model_summary(u) for name, u in sorted(self._usage.items())}
            total: Counter[str] = Counter()
            for usage in self._usage.values():
                total.update(usage.counts)
            firsts = [u.first_s for u in self._usage.values() if u.first_s is not None]
            lasts = [u.last_s for u in self._usage.values() if u.last_s is not None]
        overall = _rates(total, min(firsts, default=None), max(lasts, default=None))
        return {**overall, "models": models, "settings": self.settings()}


COUNTED = ("requests", "answered", "429", "500", "hang", "tokens_charged")


def _rates(counts: Counter[str], first: float | None, last: float | None) -> dict[str, Any]:
    busy = (last - first) if first is not None and last is not None else 0.0
    answered = counts["answered"]
    return {
        **{name: counts[name] for name in COUNTED},
        "busy_s": round(busy, 3),
        "answered_per_minute": round(answered / busy * 60, 2) if busy > 0 else None,
    }


def _model_summary(usage: _Usage) -> dict[str, Any]:
    return _rates(usage.counts, usage.first_s, usage.last_s)


RATE_LIMIT_MESSAGE = (
    "Rate limit reached for {model} on {what}: Limit {limit}, Requested {cost}. "
    "Please try again in {wait}."
)
SERVER_ERROR = {
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}


class _Handler(BaseHTTPRequestHandler):
    server: ProviderSimulator
    protocol_version = "HTTP/1.1"  # keep-alive, as a hosted endpoint

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up
            self.close_connection = True

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(400, {"error": {"message": "the body is not JSON"}}, {})
        provider = self.server.provider
        decision = provider.admit(body, raw)
        if decision.kind == "429":
            return self._rate_limited(decision)
        stopping = self.server.stopping
        if decision.kind == "hang":
            stopping.wait(provider.hang_s)
            self.close_connection = True  # dropped without an answer
            return None
        stopping.wait(decision.latency_s)
        status = 500 if decision.kind == "500" else 200
        provider.answered(decision.model, status)  # counted before it goes out: a client
        # that reads the summary right after its reply finds it counted
        return self._send(
            status, SERVER_ERROR if status == 500 else completion(body), decision.headers
        )

    def _rate_limited(self, decision: Decision) -> None:
        provider = self.server.provider
        headers = dict(decision.headers)
        if math.isfinite(decision.retry_after_s):
            headers["retry-after"] = str(math.ceil(decision.retry_after_s))
            headers["retry-after-ms"] = str(math.ceil(decision.retry_after_s * 1000))
            short_of_requests = int(headers.get("x-ratelimit-remaining-requests", "1")) < 1
            what = "requests per min (RPM)" if short_of_requests else "tokens per min (TPM)"
            limit = provider.rpm if short_of_requests else provider.tpm
            wait = duration(decision.retry_after_s)
        else:  # larger than the whole token limit: no wait helps
            what, limit, wait = "tokens per min (TPM)", provider.tpm, "never (request too large)"
        message = RATE_LIMIT_MESSAGE.format(
            model=decision.model,
            what=what,
            limit=int(limit or 0),
            cost=1 if what.startswith("requests") else decision.tokens,
            wait=wait,
        )
        error = {
            "message": message,
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
        self._send(429, {"error": error}, headers)


class ProviderSimulator(ThreadingHTTPServer):
    """The endpoint on ``127.0.0.1`` (a free port unless ``port``), one thread per
    connection, served from a daemon thread while used as a context manager. Keyword
    arguments are ``Provider``'s."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, port: int = 0, **settings: Any) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.provider = Provider(**settings)
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def summary(self) -> dict[str, Any]:
        return self.provider.summary()

    def __enter__(self) -> ProviderSimulator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()  # wakes the latency sleeps and hangs
        self.shutdown()
        self.server_close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The simulator's settings as command-line options (``settings_from`` reads them)."""
    parser.add_argument("--rpm", type=float, default=None, help="requests/minute per model")
    parser.add_argument("--tpm", type=float, default=None, help="tokens/minute per model")
    parser.add_argument("--burst-s", type=float, default=60.0, help="bucket size, seconds")
    parser.add_argument("--latency-median", type=float, default=0.3, help="seconds")
    parser.add_argument("--latency-p99", type=float, default=3.0, help="seconds")
    parser.add_argument("--latency-max", type=float, default=8.0, help="seconds")
    parser.add_argument("--error-rate", type=float, default=0.01, help="share answered 500")
    parser.add_argument("--hang-rate", type=float, default=0.005, help="share hung")
    parser.add_argument("--hang-s", type=float, default=30.0, help="how long a hang lasts")
    parser.add_argument("--default-max-tokens", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)


def settings_from(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "rpm": args.rpm,
        "tpm": args.tpm,
        "burst_s": args.burst_s,
        "latency_median_s": args.latency_median,
        "latency_p99_s": args.latency_p99,
        "latency_max_s": args.latency_max,
        "error_rate": args.error_rate,
        "hang_rate": args.hang_rate,
        "hang_s": args.hang_s,
        "default_max_tokens": args.default_max_tokens,
        "seed": args.seed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    add_arguments(parser)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ProviderSimulator(args.port, **settings_from(args)) as server:
        print(server.base_url, flush=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        print(json.dumps(server.summary(), indent=2), flush=True)


if __name__ == "__main__":
    main()

"""One hosted model's pace in this process: its per-minute limits, the calls in flight, and
the pause its provider asked for.

Every role and every concurrent rollout of this process that calls the same model (same
provider, endpoint, model name and key) shares one ``Throttle`` (``throttle_for``):

- ``requests_per_minute`` / ``tokens_per_minute``: a client-side pace per limit (the
  generic cell rate algorithm: calls are spaced evenly at the limit, with a burst of one
  second's worth), so the provider's limit is not hit to begin with. A call's tokens are
  estimated before it is sent (its text's characters / 4, plus its ``max_tokens``, as
  OpenAI counts a request against its limit) and settled with the tokens it used.
- Adaptive concurrency: at most ``limit`` calls in flight, which starts at the model's
  ``concurrency``, halves on a rate-limit answer (once per cool-down) and grows back by
  one per ``limit`` successful calls, so ``concurrency`` never needs tuning by hand to
  stay under a provider's limit.
- The cool-down: a rate-limit answer's requested wait holds every call of the model until
  it has passed (the limit is the account's, not the call's). ``rate_notices`` makes the
  waits heard as one line: ``rate-limited by openai/gpt-4.1-mini: 6 calls waiting 20 s``.

What is shared stops at the process: ``emery runner`` processes and Ray workers each pace
themselves, and the provider's own answers (honoured above) keep them together under it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from emery.core.models import ChatMessage

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
Notice = Callable[[str], None]

NOTICE_EVERY_S = 10.0  # at most one rate-limit line per model this often
NOTICE_AFTER_S = 0.5  # the line counts the calls that joined the wait by then


class Pace:
    """Units (requests or tokens) spaced evenly at ``per_minute``, with a burst of
    ``burst_s`` seconds' worth: ``reserve`` says how long a call of ``units`` must wait."""

    def __init__(self, per_minute: float, *, burst_s: float = 1.0) -> None:
        self.per_minute = per_minute
        self.interval = 60.0 / per_minute  # seconds per unit
        self.burst_s = burst_s
        self._due = float("-inf")  # when the units reserved so far are paid for

    def reserve(self, units: float, now: float) -> float:
        """Reserve ``units`` at ``now``: seconds to wait before sending them."""
        start = max(now, self._due - self.burst_s)
        self._due = max(self._due, now) + units * self.interval
        return start - now

    def settle(self, reserved: float, used: float) -> None:
        """A call reserved ``reserved`` units and used ``used``: the difference is paid back
        (or owed)."""
        self._due += (used - reserved) * self.interval

    def hold_until(self, moment: float) -> None:
        """Nothing is paid for before ``moment`` (a provider's cool-down)."""
        self._due = max(self._due, moment)


@dataclass
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


class SlotGate:
    """At most ``limit`` holders at once, shared across event loops and threads; ``limit``
    moves between 1 and ``ceiling`` (additive increase, multiplicative decrease)."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.in_flight < int(self.limit) and not self._waiters:
                self.in_flight += 1
                return
            waiter = _Waiter(loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                if waiter in self._waiters:  # never granted
                    self._waiters.remove(waiter)
                    raise
            if waiter.future.done() and not waiter.future.cancelled():
                self.release()  # granted just as it was cancelled
            raise  # a grant still on its way sees the cancelled future and gives it back

    def release(self, *, succeeded: bool = False) -> None:
        """A holder is done; a success lets the limit grow by ``1 / limit``."""
        with self._lock:
            self.in_flight -= 1
            if succeeded:
                self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
            self._grant()

    def shrink(self) -> None:
        """A rate-limit answer: half the calls that were in flight (at least one)."""
        with self._lock:
            self.limit = max(1.0, min(self.limit, float(max(self.in_flight, 1))) / 2.0)

    def _grant(self) -> None:
        while self._waiters and self.in_flight < int(self.limit):
            waiter = self._waiters.popleft()
            self.in_flight += 1
            waiter.loop.call_soon_threadsafe(self._hand_over, waiter.future)

    def _hand_over(self, future: asyncio.Future[None]) -> None:
        if future.done():  # cancelled while the grant was on its way: give the slot back
            self.release()
        else:
            future.set_result(None)


@dataclass
class Ticket:
    """One admitted call: the tokens it reserved."""

    tokens: float = 0.0


@dataclass
class ThrottleStats:
    """What a throttle did: rate-limit answers, seconds calls spent in cool-downs, seconds
    spent waiting on the client-side pace."""

    rate_limited: int = 0
    cooldown_wait_s: float = 0.0
    pace_wait_s: float = 0.0


@dataclass
class Throttle:
    """The shared pace of one model (see the module's docstring)."""

    name: str
    concurrency: int
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    clock: Clock = time.monotonic
    sleep: Sleep = asyncio.sleep
    stats: ThrottleStats = field(default_factory=ThrottleStats)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.gate = SlotGate(self.concurrency)
        self._requests = Pace(self.requests_per_minute) if self.requests_per_minute else None
        self._tokens = Pace(self.tokens_per_minute) if self.tokens_per_minute else None
        self.cool_until = float("-inf")
        self._last_shrink = float("-inf")
        self.waiting = 0  # calls waiting out a cool-down now
        self._noticed_at = float("-inf")

    def tighten(
        self, *, requests_per_minute: float | None, tokens_per_minute: float | None
    ) -> None:
        """Another user of the model states limits: the lower of each pair holds."""
        with self._lock:
            if requests_per_minute and (
                self._requests is None or requests_per_minute < self._requests.per_minute
            ):
                self._requests = Pace(requests_per_minute)
                self.requests_per_minute = requests_per_minute
            if tokens_per_minute and (
                self._tokens is None or tokens_per_minute < self._tokens.per_minute
            ):
                self._tokens = Pace(tokens_per_minute)
                self.tokens_per_minute = tokens_per_minute

    async def admit(self, tokens: float) -> Ticket:
        """Wait for the cool-down, the pace and a slot; the call may then be sent."""
        await self._cool_down()
        with self._lock:
            now = self.clock()
            wait = 0.0
            if self._requests is not None:
                wait = max(wait, self._requests.reserve(1, now))
            if self._tokens is not None:
                wait = max(wait, self._tokens.reserve(tokens, now))
        ticket = Ticket(tokens=tokens if self._tokens is not None else 0.0)
        if wait > 0:
            self.stats.pace_wait_s += wait
            await self.sleep(wait)
        await self.gate.acquire()
        if self.cool_until > self.clock():  # a cool-down began while this call waited
            self.gate.release()
            return await self.admit_again(ticket)
        return ticket

    async def admit_again(self, ticket: Ticket) -> Ticket:
        """``admit`` for a call already paced (its tokens reserved): cool-down and slot."""
        while True:
            await self._cool_down()
            await self.gate.acquire()
            if self.cool_until <= self.clock():
                return ticket
            self.gate.release()

    def done(self, ticket: Ticket, *, used_tokens: int | None) -> None:
        """A call answered: its slot back, its tokens settled."""
        if self._tokens is not None and used_tokens:
            with self._lock:
                self._tokens.settle(ticket.tokens, used_tokens)
        self.gate.release(succeeded=True)

    def failed(self, ticket: Ticket) -> None:
        """A call failed without a rate-limit answer: its slot back."""
        self.gate.release()

    def limited(self, wait_s: float) -> None:
        """A call got a rate-limit answer asking for ``wait_s``: its slot back, every call
        of the model waits that long, and fewer go at once."""
        with self._lock:
            now = self.clock()
            self.stats.rate_limited += 1
            self.cool_until = max(self.cool_until, now + wait_s)
            for pace in (self._requests, self._tokens):
                if pace is not None:
                    pace.hold_until(self.cool_until)
            shrink = now >= self._last_shrink + max(wait_s, 1.0)
            if shrink:
                self._last_shrink = now
        if shrink:
            self.gate.shrink()
        self.gate.release()

    async def _cool_down(self) -> None:
        while (left := self.cool_until - self.clock()) > 0:
            with self._lock:
                self.waiting += 1
                notice = self._noticed_at + NOTICE_EVERY_S <= self.clock()
                if notice:
                    self._noticed_at = self.clock()
            if notice:
                self._schedule_notice()
            try:
                await self.sleep(left)
                self.stats.cooldown_wait_s += left
            finally:
                with self._lock:
                    self.waiting -= 1

    def _schedule_notice(self) -> None:
        sink = _NOTICES.get()
        if sink is None:
            return

        def say() -> None:
            left = self.cool_until - self.clock()
            calls = "call" if self.waiting == 1 else "calls"
            sink(f"rate-limited by {self.name}: {self.waiting} {calls} waiting {left:.0f} s")

        asyncio.get_running_loop().call_later(NOTICE_AFTER_S, say)


_registry: dict[tuple[str, ...], Throttle] = {}
_registry_lock = threading.Lock()


def throttle_for(
    key: tuple[str, ...],
    name: str,
    *,
    concurrency: int,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
) -> Throttle:
    """The process's throttle for the model ``key`` names (provider, endpoint, model, a
    digest of the key), made on first use; later users can only lower its limits."""
    with _registry_lock:
        throttle = _registry.get(key)
        if throttle is None:
            throttle = _registry[key] = Throttle(
                name,
                concurrency,
                requests_per_minute=requests_per_minute,
                tokens_per_minute=tokens_per_minute,
            )
            return throttle
    throttle.tighten(requests_per_minute=requests_per_minute, tokens_per_minute=tokens_per_minute)
    return throttle


def estimate_tokens(messages: Sequence[ChatMessage], max_tokens: int | None) -> int:
    """What a call counts against a tokens-per-minute limit before it is answered: its
    text's characters / 4 and 4 per message, plus the tokens it may generate."""
    chars = sum(len(str(message.get("content") or "")) for message in messages)
    return chars // 4 + 4 * len(messages) + (max_tokens or 0)


_NOTICES: ContextVar[Notice | None] = ContextVar("emery_rate_notices", default=None)


@contextmanager
def rate_notices(sink: Notice) -> Iterator[None]:
    """Make ``sink`` hear, as one line, the rate-limit waits of the calls made in this
    context (and the tasks it starts)."""
    token = _NOTICES.set(sink)
    try:
        yield
    finally:
        _NOTICES.reset(token)

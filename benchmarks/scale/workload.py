"""What both sides of the scale benchmark measure, and how its figures are summed up.

A side is a store-as-queue backend driven through one protocol: ``enqueue`` a batch of
rollouts, ``claim`` one (dequeue, its attempt started), ``update`` the attempt (a
heartbeat), ``add_spans`` (``SPANS`` spans of one attempt) and ``finish`` it with a
result. ``run_runners`` drives ``n`` runner threads through claim, update, spans, an
agent (no-op, or a sleep) and finish until the queue is empty; a side with
``finish_and_claim(handle, worker)`` (emery's: what ``emery runner`` sends) finishes and
claims the next rollout in one call, timed as the claim.

Only the standard library here: the peer's virtual environment imports this file too.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

SPANS = 4
BATCH = 64


class Side(Protocol):
    """One store driven through the queue protocol (``handle``: what claim returned)."""

    def enqueue(self, n: int) -> None: ...

    def claim(self, worker: str) -> Any | None: ...

    def update(self, handle: Any) -> None: ...

    def add_spans(self, handle: Any, n: int) -> None: ...

    def finish(self, handle: Any) -> None: ...


@dataclass
class Timings:
    """Seconds per call of each operation, thread-safe."""

    calls: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter()
        out = fn(*args)
        elapsed = time.perf_counter() - start
        with self.lock:
            self.calls.setdefault(name, []).append(elapsed)
        return out

    def p99_ms(self, name: str) -> float:
        values = sorted(self.calls.get(name, [0.0]))
        return 1000 * values[min(len(values) - 1, int(0.99 * len(values)))]

    def mean_ms(self, name: str) -> float:
        return 1000 * statistics.fmean(self.calls.get(name, [0.0]))


def op_rates(side: Side, n: int) -> dict[str, float]:
    """Operations per second of one client, each op over ``n`` rollouts in turn."""
    rates: dict[str, float] = {}
    start = time.perf_counter()
    for done in range(0, n, BATCH):
        side.enqueue(min(BATCH, n - done))
    rates["enqueue"] = n / (time.perf_counter() - start)
    start = time.perf_counter()
    handles = [side.claim("w0") for _ in range(n)]
    rates["claim"] = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for handle in handles:
        side.update(handle)
    rates["update"] = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for handle in handles:
        side.add_spans(handle, SPANS)
    rates["spans"] = n * SPANS / (time.perf_counter() - start)
    start = time.perf_counter()
    for handle in handles:
        side.finish(handle)
    rates["finish"] = n / (time.perf_counter() - start)
    return rates


def run_runners(side: Side, runners: int, rollouts: int, agent_s: float = 0.0) -> dict[str, float]:
    """``runners`` threads take ``rollouts`` queued rollouts to the end: rollouts/s, spans/s
    and the p99 latency (ms) of a claim and of a span write."""
    for done in range(0, rollouts, BATCH):
        side.enqueue(min(BATCH, rollouts - done))
    timings = Timings()
    finished = [0] * runners

    fused = getattr(side, "finish_and_claim", None)  # a side that claims with its finish

    def runner(index: int) -> None:
        worker = f"runner-{index}"
        idle = 0
        handle = None
        while idle < 3:  # the queue looks empty three times in a row: done
            if handle is None:
                handle = timings.timed("claim", side.claim, worker)
            if handle is None:
                idle += 1
                time.sleep(0.01)
                continue
            idle = 0
            side.update(handle)
            if agent_s:
                time.sleep(agent_s)
            timings.timed("spans", side.add_spans, handle, SPANS)
            if fused is not None:
                handle = timings.timed("claim", fused, handle, worker)
            else:
                side.finish(handle)
                handle = None
            finished[index] += 1

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(runners)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start - 0.03  # less the empty-queue checks at the end
    done = sum(finished)
    if done != rollouts:
        raise RuntimeError(f"{done} of {rollouts} rollouts finished")
    return {
        "rollouts_per_s": done / elapsed,
        "spans_per_s": done * SPANS / elapsed,
        "claim_p99_ms": timings.p99_ms("claim"),
        "spans_p99_ms": timings.p99_ms("spans"),
    }

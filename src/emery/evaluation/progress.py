"""Rollout-level progress of one evaluation batch, for live displays.

The evaluation service counts a batch's rollouts as they finish and passes each count to a
sink (a terminal progress bar, a line every few seconds, a notebook): in memory, with no
store write per rollout. A sink that raises is logged and ignored: a display never stops
a job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from emery.core.example_result import ExampleResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchProgress:
    """Where one batch stands: ``done`` of ``total`` new rollouts of ``candidate_id`` on
    ``split``, ``failed`` of them for errors, ``elapsed_s`` since the batch started;
    ``unreadable`` of them scored 0 on a reply the parser could not read (wrong answers,
    not failures)."""

    candidate_id: str
    split: str
    done: int
    total: int
    failed: int
    elapsed_s: float
    unreadable: int = 0

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    @property
    def rate(self) -> float | None:
        """Rollouts per second so far (None before the first one finishes)."""
        return self.done / self.elapsed_s if self.done and self.elapsed_s > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None while unknown)."""
        rate = self.rate
        return (self.total - self.done) / rate if rate else None


ProgressSink = Callable[[BatchProgress], None]


class BatchCounter:
    """Counts one batch's finished rollouts and reports each count to ``sink``."""

    def __init__(self, sink: ProgressSink, candidate_id: str, split: str, total: int) -> None:
        self.sink = sink
        self.candidate_id = candidate_id
        self.split = split
        self.total = total
        self.done = 0
        self.failed = 0
        self.unreadable = 0
        self.started = time.monotonic()
        self._report()

    def add(self, result: ExampleResult) -> None:
        """One more rollout finished."""
        self.done += 1
        self.failed += result.error is not None
        self.unreadable += result.unreadable is not None
        self._report()

    def _report(self) -> None:
        progress = BatchProgress(
            candidate_id=self.candidate_id,
            split=self.split,
            done=self.done,
            total=self.total,
            failed=self.failed,
            elapsed_s=time.monotonic() - self.started,
            unreadable=self.unreadable,
        )
        try:
            self.sink(progress)
        except Exception:
            log.exception("a progress display failed; the job goes on")

"""Write-behind for live trace rows: rollouts, attempts and spans buffered in memory and
written in one call per batch from a background thread.

A rollout changes status five or six times in a tenth of a second; writing each change as
its own transaction costs more CPU than the rollout itself. The buffer keeps the latest
object per rollout and attempt id (a later change replaces an earlier one that was not
written yet) and every span, and hands them to ``write`` when ``max_batch`` items are
pending or the oldest has waited ``max_delay_s``, and on ``flush``. Objects are converted
by ``write`` when their batch is written, so a batch always holds their newest state; a
change made while a batch is being written is queued again and written in the next one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord

log = logging.getLogger(__name__)

WriteBatch = Callable[[Sequence[Rollout], Sequence[Attempt], Sequence[SpanRecord]], None]


class WriteBehind:
    """Buffers trace objects and writes them in batches, off the caller's thread.

    ``write`` receives one batch at a time (never two at once) and must not raise;
    ``flush`` writes everything pending in the calling thread and returns when it (and any
    batch already being written) is stored. The writer thread starts when something is
    buffered and ends when the buffer is empty, so an idle buffer holds no thread.
    """

    def __init__(self, write: WriteBatch, *, max_batch: int = 512, max_delay_s: float = 0.25):
        self.write = write
        self.max_batch = max_batch
        self.max_delay_s = max_delay_s
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        self._rollouts: dict[str, Rollout] = {}
        self._attempts: dict[str, Attempt] = {}
        self._spans: list[SpanRecord] = []
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """How many objects wait to be written."""
        with self._lock:
            return self._size()

    def _size(self) -> int:
        return len(self._rollouts) + len(self._attempts) + len(self._spans)

    def rollout(self, rollout: Rollout) -> None:
        with self._lock:
            self._rollouts[rollout.id] = rollout
            self._added()

    def attempt(self, attempt: Attempt) -> None:
        with self._lock:
            self._attempts[attempt.id] = attempt
            self._added()

    def spans(self, spans: Sequence[SpanRecord]) -> None:
        with self._lock:
            self._spans.extend(spans)
            self._added()

    def _added(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="emery-trace-writer", daemon=True
            )
            self._thread.start()
        elif self._size() >= self.max_batch:
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._size():
                    self._thread = None
                    return
                if self._size() < self.max_batch:
                    self._wake.wait(self.max_delay_s)
            self.flush()

    def flush(self) -> None:
        """Write everything buffered now."""
        with self._write_lock:
            with self._lock:
                rollouts = list(self._rollouts.values())
                attempts = list(self._attempts.values())
                spans = self._spans
                self._rollouts, self._attempts, self._spans = {}, {}, []
                self._wake.notify()  # a waiting writer rechecks (and ends if idle)
            if rollouts or attempts or spans:
                try:
                    self.write(rollouts, attempts, spans)
                except Exception:  # a broken writer must not kill the thread or the caller
                    log.exception("writing %d trace rows failed", len(rollouts) + len(spans))

"""Progress as plain text: a batch's progress line every few seconds, and the reporter the
Python API prints with while a job runs (a notebook or a script shows what happens)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from emery.core.events import Event
from emery.evaluation.progress import BatchProgress
from emery.reports.event_text import event_line, progress_line

PROGRESS_EVERY_S = 5.0


class ProgressLines:
    """Writes a batch's progress line at most every ``every_s`` seconds while it runs, and
    its last line when a batch that wrote one finishes (quick batches stay silent)."""

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        every_s: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write = write
        self.every_s = every_s
        self.clock = clock
        self._last = 0.0
        self._wrote = False

    def __call__(self, progress: BatchProgress) -> None:
        now = self.clock()
        if progress.done == 0:
            self._last, self._wrote = now, False
        elif progress.finished:
            if self._wrote:
                self.write(progress_line(progress))
        elif now - self._last >= self.every_s:
            self.write(progress_line(progress))
            self._last, self._wrote = now, True


class TextReporter:
    """Each event as a line and each batch's progress every few seconds, on ``stream``
    (stderr by default); safe to call from the job's thread and the caller's."""

    def __init__(self, stream: TextIO | None = None, *, every_s: float = PROGRESS_EVERY_S):
        self.stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()
        self.progress = ProgressLines(self._write, every_s=every_s)

    def event(self, item: Event) -> None:
        self._write(event_line(item))

    def _write(self, line: str) -> None:
        with self._lock:
            print(line, file=self.stream, flush=True)

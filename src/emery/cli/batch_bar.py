"""A live progress bar for the evaluation batch that is running (terminals only)."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from emery.evaluation.progress import BatchProgress


class BatchBar:
    """One bar per running batch: rollouts done of N, failures and unreadable replies,
    elapsed time and ETA; it disappears when its batch finishes (the batch's event line
    says how it went)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rollouts{task.fields[failed]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self.task: TaskID | None = None

    def __enter__(self) -> BatchBar:
        self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.progress.stop()

    def update(self, batch: BatchProgress) -> None:
        if batch.done == 0 or self.task is None:
            self._close()
            description = f"scoring {batch.candidate_id[:8]} on {batch.split}"
            self.task = self.progress.add_task(description, total=batch.total, failed="")
        failed = f", {batch.failed} failed" if batch.failed else ""
        if batch.unreadable:
            failed += f", {batch.unreadable} unreadable"
        self.progress.update(self.task, completed=batch.done, failed=failed)
        if batch.finished:
            self._close()

    def _close(self) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None

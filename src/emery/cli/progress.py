"""What a foreground job run shows on the terminal while it runs (on stderr)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from types import TracebackType
from typing import Literal

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from emery.cli.batch_bar import BatchBar
from emery.cli.chart import ScoreChart, TrainingChart
from emery.core.events import Event
from emery.evaluation.progress import BatchProgress
from emery.reports.event_text import event_line, progress_line
from emery.sdk.progress_text import ProgressLines

StreamFormat = Literal["cli", "chart", "none"]


class RunDisplay:
    """``cli``: one line per event, and the running batch's progress (a bar on a terminal,
    a line every few seconds otherwise); ``chart``: a live score chart with the latest
    events and the batch's progress; ``none``: nothing."""

    def __init__(
        self,
        mode: StreamFormat,
        console: Console,
        *,
        job_id: str,
        limit: int | None = None,
    ) -> None:
        self.mode = mode
        self.console = console
        self.job_id = job_id
        width = max(20, min(80, console.width - 10))
        self.chart = ScoreChart(limit=limit, width=width)
        self.training = TrainingChart(width=width)  # an SFT or RL job's curves instead
        self.recent: deque[str] = deque(maxlen=4)
        self.notes: list[str] = []
        self.live: Live | None = None
        self.state = "starting"
        self.iteration = 0
        self.batch: str | None = None
        self.bar: BatchBar | None = None
        self.lines = ProgressLines(self._print_dim)

    def __enter__(self) -> RunDisplay:
        if self.mode == "chart":
            self.live = Live(
                self._render(), console=self.console, refresh_per_second=4, transient=False
            )
            self.live.__enter__()
        elif self.mode == "cli" and self.console.is_terminal:
            self.bar = BatchBar(self.console).__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.bar is not None:
            self.bar.__exit__(kind, value, traceback)
            self.bar = None
        if self.live is not None:
            self.batch = None
            self.live.update(self._render())
            self.live.__exit__(kind, value, traceback)
            self.live = None

    def replay(self, events: Sequence[Event]) -> None:
        """Earlier events of a resumed job: they shape the chart, and are not printed."""
        for item in events:
            self._track(item)

    def feed(self, events: Sequence[Event]) -> None:
        for item in events:
            self._track(item)
            line = event_line(item)
            if self.mode == "cli":
                self.console.print(escape(line), highlight=False, soft_wrap=True)
            else:
                self.recent.append(line)
        if self.live is not None:
            self.live.update(self._render())

    def progress(self, batch: BatchProgress) -> None:
        """One more rollout of the running batch finished (or the batch started)."""
        if self.mode == "chart":
            self.batch = None if batch.finished else progress_line(batch)
            if self.live is not None:
                self.live.update(self._render())
        elif self.mode == "cli":
            if self.bar is not None:
                self.bar.update(batch)
            else:
                self.lines(batch)

    def _print_dim(self, line: str) -> None:
        self.console.print(f"[dim]{escape(line)}[/dim]", highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        """A message from the command itself (e.g. 'pausing...')."""
        if self.mode == "cli":
            self.console.print(f"[yellow]{escape(text)}[/yellow]")
        elif self.live is not None:
            self.notes.append(text)
            self.live.update(self._render())

    def _track(self, item: Event) -> None:
        self.chart.feed(item)
        self.training.feed(item)
        if item.kind in ("started", "resumed", "paused", "succeeded", "failed", "cancelled"):
            self.state = item.kind
        if item.kind == "iteration_completed":
            self.iteration = int(item.data.get("iteration", self.iteration))

    def _render(self) -> Group:
        if self.training.series:
            header = Text.assemble(
                (f"job {self.job_id}", "bold"), f" · {self.state} · step {self.training.steps}"
            )
            return self._group(header, self.training.render())
        best = max((score for _, score in self.chart.best), default=None)
        header = Text.assemble(
            (f"job {self.job_id}", "bold"),
            f" · {self.state} · iteration {self.iteration} · {self.chart.calls}",
            f"/{self.chart.limit}" if self.chart.limit else "",
            " metric calls · best val ",
            ("-" if best is None else f"{best:.1%}", "bold green"),
        )
        return self._group(header, self.chart.render())

    def _group(self, header: Text, chart: Text) -> Group:
        """The header, the chart, the latest events, the batch's progress and notes."""
        parts: list[Text] = [header, chart]
        parts += [Text(line, style="dim") for line in self.recent]
        if self.batch is not None:
            parts.append(Text(self.batch, style="cyan"))
        parts += [Text(note, style="yellow") for note in self.notes[-2:]]
        return Group(*parts)

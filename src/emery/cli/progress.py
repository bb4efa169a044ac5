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

from emery.cli.chart import ScoreChart
from emery.cli.events_text import event_line
from emery.core.events import Event

StreamFormat = Literal["cli", "chart", "none"]


class RunDisplay:
    """``cli``: one line per event; ``chart``: a live score chart with the latest events;
    ``none``: nothing."""

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
        self.chart = ScoreChart(limit=limit, width=max(20, min(80, console.width - 10)))
        self.recent: deque[str] = deque(maxlen=4)
        self.notes: list[str] = []
        self.live: Live | None = None
        self.state = "starting"
        self.iteration = 0

    def __enter__(self) -> RunDisplay:
        if self.mode == "chart":
            self.live = Live(
                self._render(), console=self.console, refresh_per_second=4, transient=False
            )
            self.live.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.live is not None:
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

    def note(self, text: str) -> None:
        """A message from the command itself (e.g. 'pausing...')."""
        if self.mode == "cli":
            self.console.print(f"[yellow]{escape(text)}[/yellow]")
        elif self.live is not None:
            self.notes.append(text)
            self.live.update(self._render())

    def _track(self, item: Event) -> None:
        self.chart.feed(item)
        if item.kind in ("started", "resumed", "paused", "succeeded", "failed", "cancelled"):
            self.state = item.kind
        if item.kind == "iteration_completed":
            self.iteration = int(item.data.get("iteration", self.iteration))

    def _render(self) -> Group:
        best = max((score for _, score in self.chart.best), default=None)
        header = Text.assemble(
            (f"job {self.job_id}", "bold"),
            f" · {self.state} · iteration {self.iteration} · {self.chart.calls}",
            f"/{self.chart.limit}" if self.chart.limit else "",
            " metric calls · best val ",
            ("-" if best is None else f"{best:.1%}", "bold green"),
        )
        parts: list[Text] = [header, self.chart.render()]
        parts += [Text(line, style="dim") for line in self.recent]
        parts += [Text(note, style="yellow") for note in self.notes[-2:]]
        return Group(*parts)

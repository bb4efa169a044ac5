"""A terminal chart of val score over metric calls, fed with job events."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text

from emery.core.events import (
    BaselineEvaluated,
    BestUpdated,
    CandidateEvaluated,
    Event,
    IterationCompleted,
)


@dataclass
class ScoreChart:
    """Dots for every val evaluation, a line for the best score so far, the baseline dotted.

    The x axis is metric calls (scored rollouts) up to the budget's limit when there is one.
    """

    limit: int | None = None
    width: int = 60
    height: int = 10
    calls: int = 0
    baseline: float | None = None
    points: list[tuple[int, float]] = field(default_factory=list)
    best: list[tuple[int, float]] = field(default_factory=list)

    def feed(self, item: Event) -> None:
        """Take in one job event (kinds the chart does not plot, or cannot read, are ignored)."""
        try:
            payload = item.payload()
        except ValueError:
            return
        match payload:
            case CandidateEvaluated() as p if p.split != "test":
                self.calls += p.new_rollouts
                if p.split == "val":
                    self.points.append((self.calls, p.score))
            case IterationCompleted() as p:
                self.calls = p.metric_calls
            case BaselineEvaluated() as p:
                self.baseline = p.score
            case BestUpdated() as p:
                self.best.append((self.calls, p.score))

    def _row(self, score: float) -> int:
        return self.height - 1 - round(min(1.0, max(0.0, score)) * (self.height - 1))

    def render(self) -> Text:
        """The chart as styled text (``height`` rows plus two axis rows)."""
        x_max = max(self.limit or 0, self.calls, 1)
        grid: list[list[tuple[str, str]]] = [[(" ", "")] * self.width for _ in range(self.height)]

        def column(x: int) -> int:
            return min(self.width - 1, round(x / x_max * (self.width - 1)))

        if self.baseline is not None:
            row = self._row(self.baseline)
            grid[row] = [("┄", "dim")] * self.width
        best_index, current = 0, None
        last_col = column(self.calls)
        for col in range(last_col + 1):
            while best_index < len(self.best) and column(self.best[best_index][0]) <= col:
                current = self.best[best_index][1]
                best_index += 1
            if current is not None:
                grid[self._row(current)][col] = ("─", "green")
        for x, score in self.points:
            grid[self._row(score)][column(x)] = ("•", "cyan")
        text = Text()
        for index, cells in enumerate(grid):
            label = {0: "100%", self.height - 1: "  0%", (self.height - 1) // 2: " 50%"}.get(
                index, "    "
            )
            text.append(f"{label} │", style="dim")
            for char, style in cells:
                text.append(char, style=style)
            text.append("\n")
        text.append("     └" + "─" * self.width + "\n", style="dim")
        right = f"{x_max} metric calls"
        text.append("      0" + right.rjust(self.width - 1) + "\n", style="dim")
        return text

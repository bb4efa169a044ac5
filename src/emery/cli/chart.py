"""Terminal charts fed with job events: val score over metric calls (a search), and loss
or reward over training steps (an SFT or RL job)."""

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


TRAINING_SERIES = {"train_loss": ("loss", "cyan"), "val_loss": ("loss", "yellow")}
REWARD_SERIES = {"train_reward": ("reward", "green")}


@dataclass
class TrainingChart:
    """An SFT or RL job's curves over training steps: train and val loss (SFT), or the mean
    reward (RL), each scaled to its own range; ``kl`` is the last KL an RL step reported."""

    width: int = 60
    height: int = 10
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    kl: float | None = None

    def feed(self, item: Event) -> None:
        """Take in one job event; kinds other than the curves' are ignored."""
        spec = {**TRAINING_SERIES, **REWARD_SERIES}.get(item.kind)
        if spec is None:
            return
        value, step = item.data.get(spec[0]), item.data.get("step")
        if not isinstance(value, int | float) or not isinstance(step, int):
            return
        self.series.setdefault(item.kind, []).append((step, float(value)))
        if isinstance(item.data.get("kl"), int | float):
            self.kl = float(item.data["kl"])

    @property
    def steps(self) -> int:
        return max((step for points in self.series.values() for step, _ in points), default=0)

    def render(self) -> Text:
        """The curves as styled text: each series a row of points, y from its min to max."""
        kinds = [kind for kind in (*TRAINING_SERIES, *REWARD_SERIES) if self.series.get(kind)]
        values = [v for kind in kinds for _, v in self.series[kind]]
        low, high = (min(values), max(values)) if values else (0.0, 1.0)
        span = (high - low) or 1.0
        x_max = max(self.steps, 1)
        grid: list[list[tuple[str, str]]] = [[(" ", "")] * self.width for _ in range(self.height)]
        for kind in kinds:
            style = {**TRAINING_SERIES, **REWARD_SERIES}[kind][1]
            for step, value in self.series[kind]:
                col = min(self.width - 1, round(step / x_max * (self.width - 1)))
                row = self.height - 1 - round((value - low) / span * (self.height - 1))
                grid[row][col] = ("•", style)
        text = Text()
        for index, cells in enumerate(grid):
            label = {0: high, self.height - 1: low}.get(index)
            text.append(f"{'' if label is None else f'{label:.3g}':>7} │", style="dim")
            for char, style in cells:
                text.append(char, style=style)
            text.append("\n")
        text.append("        └" + "─" * self.width + "\n", style="dim")
        latest = [f"{kind} {self.series[kind][-1][1]:.4g}" for kind in kinds]
        if self.kl is not None:
            latest.append(f"kl {self.kl:.3g}")
        legend = "         " + ", ".join(latest)
        text.append(legend.ljust(self.width) + f" step {self.steps}\n", style="dim")
        return text

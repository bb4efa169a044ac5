"""Figures for the HTML report, rendered server-side by matplotlib into inline SVG."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure

from emery.core.events import Event
from emery.core.models import Candidate


@dataclass(frozen=True)
class ScorePoint:
    """One scoring of a candidate: after ``metric_calls`` rollouts, ``score`` on ``n`` examples."""

    metric_calls: int
    score: float
    split: str
    n: int
    candidate_id: str


def score_points(events: Sequence[Event]) -> list[ScorePoint]:
    """Every ``candidate_evaluated`` event placed at the metric calls spent so far."""
    spent = 0
    points = []
    for item in events:
        if item.kind != "candidate_evaluated":
            continue
        spent += int(item.data.get("new_rollouts", 0))
        points.append(
            ScorePoint(
                metric_calls=spent,
                score=float(item.data["score"]),
                split=str(item.data["split"]),
                n=int(item.data["n"]),
                candidate_id=str(item.data["candidate_id"]),
            )
        )
    return points


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def score_over_budget(points: Sequence[ScorePoint], val_size: int) -> str:
    """Val and minibatch scores against metric calls, with the best full-val score so far."""
    figure = Figure(figsize=(8, 3.6))
    axes = figure.subplots()
    full = [p for p in points if p.split == "val" and p.n >= val_size]
    partial = [p for p in points if not (p.split == "val" and p.n >= val_size)]
    if partial:
        axes.scatter(
            [p.metric_calls for p in partial],
            [p.score for p in partial],
            s=14,
            alpha=0.45,
            color="#8a8a8a",
            label="minibatch / val subsample",
        )
    if full:
        axes.scatter(
            [p.metric_calls for p in full],
            [p.score for p in full],
            s=36,
            color="#1f77b4",
            label="full val",
            zorder=3,
        )
        xs, ys, best = [], [], -1.0
        for point in full:
            best = max(best, point.score)
            xs.append(point.metric_calls)
            ys.append(best)
        xs.append(max(p.metric_calls for p in points))
        ys.append(best)
        axes.step(xs, ys, where="post", color="#d62728", label="best so far", zorder=2)
    axes.set_xlabel("metric calls (scored rollouts)")
    axes.set_ylabel("score")
    axes.set_ylim(-0.03, 1.03)
    axes.grid(alpha=0.3)
    if points:
        axes.legend(loc="lower right", fontsize=8)
    return _svg(figure)


def lineage_plot(
    candidates: Sequence[Candidate], scores: Mapping[str, float | None], best_id: str | None
) -> str:
    """Each candidate at (order of creation, val score), joined to its parents."""
    order = {c.id: i for i, c in enumerate(candidates)}
    figure = Figure(figsize=(8, 3.6))
    axes = figure.subplots()
    for candidate in candidates:
        score = scores.get(candidate.id)
        if score is None:
            continue
        for parent in candidate.lineage.parents:
            parent_score = scores.get(parent)
            if parent in order and parent_score is not None:
                axes.plot(
                    [order[parent], order[candidate.id]],
                    [parent_score, score],
                    color="#9ab",
                    linewidth=0.9,
                    zorder=1,
                )
    scored = {c.id: (c, value) for c in candidates if (value := scores.get(c.id)) is not None}
    colors = {"seed": "#2ca02c", "merge": "#9467bd"}
    axes.scatter(
        [order[cid] for cid in scored],
        [value for _, value in scored.values()],
        c=[colors.get(c.lineage.operation, "#1f77b4") for c, _ in scored.values()],
        s=30,
        zorder=2,
    )
    for cid, (_, value) in scored.items():
        if cid == best_id:
            axes.scatter([order[cid]], [value], marker="*", s=220, color="#d62728", zorder=3)
        axes.annotate(
            cid[:6], (order[cid], value), fontsize=6, xytext=(3, 3), textcoords="offset points"
        )
    axes.set_xlabel("candidate (in order of creation)")
    axes.set_ylabel("val score")
    axes.set_ylim(-0.03, 1.08)
    axes.grid(alpha=0.3)
    return _svg(figure)

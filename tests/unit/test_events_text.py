"""Job events as one terminal line each, and the score chart fed with them."""

from __future__ import annotations

from emery.algorithms.gepa.events import GepaValEvaluated
from emery.cli.chart import ScoreChart, TrainingChart
from emery.core.events import (
    BaselineEvaluated,
    BestUpdated,
    CandidateEvaluated,
    Event,
    IterationCompleted,
    StateChanged,
    event,
)
from emery.reports.event_text import describe_event


def test_known_kinds_read_as_words() -> None:
    event = Event(
        kind="best_updated",
        data={"candidate_id": "c-1234567890", "score": 0.5, "previous_score": 0.25},
    )
    assert describe_event(event) == "best is now c-123456: 50.0% (was 25.0%)"
    assert describe_event(Event(kind="paused", data={"reason": "budget"})) == "paused (budget)"


def test_events_made_from_payloads_read_like_stored_ones() -> None:
    first = Event.of(BestUpdated(candidate_id="c-1234567890", score=0.5))
    assert describe_event(first) == "best is now c-123456: 50.0%"
    paused = Event.of(StateChanged(state="paused"), kind="paused")
    assert describe_event(paused) == "paused"


def test_algorithm_kinds_show_their_fields() -> None:
    item = Event.of(GepaValEvaluated(iteration=2, candidate_id="c1", score=0.5, n=4))
    assert describe_event(item) == "gepa.val_evaluated iteration=2 candidate_id=c1 score=0.5 n=4"


def test_unknown_kinds_show_data_with_long_texts_cut_to_one_short_line() -> None:
    prompt = "Solve the problem.\n" + "word " * 200
    line = describe_event(Event(kind="reflection", data={"component": "solve", "prompt": prompt}))
    assert "\n" not in line
    assert line.startswith("reflection component=solve prompt=Solve the problem. word")
    assert line.endswith("…")
    assert len(line) < 120


def test_a_known_kind_with_missing_fields_falls_back_to_key_value() -> None:
    assert describe_event(Event(kind="best_updated", data={"score": 1})) == "best_updated score=1"


def test_the_chart_plots_val_scores_the_best_line_and_the_baseline() -> None:
    chart = ScoreChart(limit=20)
    for payload in (
        CandidateEvaluated(candidate_id="s", split="val", score=0.25, n=4, new_rollouts=4),
        BaselineEvaluated(candidate_id="s", split="val", score=0.25, n=4),
        BestUpdated(candidate_id="s", score=0.25),
        CandidateEvaluated(candidate_id="c", split="train", score=1.0, n=3, new_rollouts=3),
        CandidateEvaluated(candidate_id="c", split="test", score=1.0, n=9, new_rollouts=9),
        CandidateEvaluated(candidate_id="c", split="val", score=0.75, n=4, new_rollouts=4),
        BestUpdated(candidate_id="c", score=0.75, previous_score=0.25),
    ):
        chart.feed(Event.of(payload))
    chart.feed(Event(kind="best_updated", data={"score": "not a number"}))
    assert chart.points == [(4, 0.25), (11, 0.75)]
    assert chart.best == [(4, 0.25), (11, 0.75)]
    assert chart.baseline == 0.25
    chart.feed(Event.of(IterationCompleted(iteration=1, metric_calls=12)))
    assert chart.calls == 12
    assert "100%" in chart.render().plain


def test_the_training_chart_plots_losses_and_rewards_over_steps() -> None:
    chart = TrainingChart(width=20, height=5)
    for step, loss in ((1, 2.0), (2, 1.5), (3, 1.0)):
        chart.feed(event("train_loss", step=step, loss=loss))
    chart.feed(event("val_loss", step=3, loss=1.25))
    chart.feed(Event(kind="train_loss", data={"step": "x", "loss": 1.0}))  # unreadable: ignored
    chart.feed(Event.of(IterationCompleted(iteration=1, metric_calls=12)))  # not a curve
    assert chart.series == {
        "train_loss": [(1, 2.0), (2, 1.5), (3, 1.0)],
        "val_loss": [(3, 1.25)],
    }
    text = chart.render().plain
    rows = text.splitlines()
    assert rows[0].strip().startswith("2 │")  # the top row is the highest loss
    assert rows[4].strip().startswith("1 │")
    assert "train_loss 1, val_loss 1.25" in text
    assert text.rstrip().endswith("step 3")
    rewards = TrainingChart()
    rewards.feed(event("train_reward", step=1, reward=0.5, kl=0.01))
    assert "train_reward 0.5, kl 0.01" in rewards.render().plain

"""Job events as one terminal line each."""

from __future__ import annotations

from emery.cli.events_text import describe_event
from emery.core.events import Event


def test_known_kinds_read_as_words() -> None:
    event = Event(
        kind="best_updated",
        data={"candidate_id": "c-1234567890", "score": 0.5, "previous_score": 0.25},
    )
    assert describe_event(event) == "best is now c-123456: 50.0% (was 25.0%)"
    assert describe_event(Event(kind="paused", data={"reason": "budget"})) == "paused (budget)"


def test_unknown_kinds_show_data_with_long_texts_cut_to_one_short_line() -> None:
    prompt = "Solve the problem.\n" + "word " * 200
    line = describe_event(Event(kind="reflection", data={"component": "solve", "prompt": prompt}))
    assert "\n" not in line
    assert line.startswith("reflection component=solve prompt=Solve the problem. word")
    assert line.endswith("…")
    assert len(line) < 120


def test_a_known_kind_with_missing_fields_falls_back_to_key_value() -> None:
    assert describe_event(Event(kind="best_updated", data={"score": 1})) == "best_updated score=1"

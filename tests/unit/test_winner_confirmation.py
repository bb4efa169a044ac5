"""The guards a confirmed winner passes (``algorithms.winner_confirmation``): the paired
interval, and for MIPRO the exact sign test on the pairs that disagree as well."""

from __future__ import annotations

from emery.algorithms.winner_confirmation import (
    WINNER_CONFIDENCE,
    interval_passes,
    sign_test,
    sign_test_passes,
)


def pairs(wins: int, losses: int, agree: int) -> tuple[list[float], list[float]]:
    """0/1 scores: ``wins`` pairs where the first is right alone, ``losses`` where the
    second is, ``agree`` where both are right."""
    first = [1.0] * wins + [0.0] * losses + [1.0] * agree
    second = [0.0] * wins + [1.0] * losses + [1.0] * agree
    return first, second


def test_two_wins_and_no_loss_pass_the_interval_but_not_the_sign_test() -> None:
    for agree in (0, 20, 48):
        mine, theirs = pairs(2, 0, agree)
        assert interval_passes(mine, theirs, WINNER_CONFIDENCE)
        assert sign_test(mine, theirs) == 0.25
        assert not sign_test_passes(mine, theirs, WINNER_CONFIDENCE)


def test_three_wins_and_no_loss_pass_both() -> None:
    mine, theirs = pairs(3, 0, 37)
    assert sign_test(mine, theirs) == 0.125
    assert sign_test_passes(mine, theirs, WINNER_CONFIDENCE)
    assert not sign_test_passes(mine, theirs, 0.95), "one-sided 0.025 needs more"


def test_graded_scores_are_judged_on_the_interval_alone() -> None:
    mine, theirs = [0.75] * 10, [0.5] * 10
    assert sign_test(mine, theirs) is None
    assert sign_test_passes(mine, theirs, WINNER_CONFIDENCE) == interval_passes(
        mine, theirs, WINNER_CONFIDENCE
    )

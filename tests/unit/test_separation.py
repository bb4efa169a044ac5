"""What a budget can separate: the plans' figures against a quick simulation of the
evidence module on pairs of candidates."""

from __future__ import annotations

import random

import pytest

from emery.algorithms.evidence import paired
from emery.algorithms.separation import (
    TYPICAL,
    Assumptions,
    detectable,
    examples_for,
    half_width,
    power,
    separation,
)


def simulated_power(difference: float, n: int, *, runs: int, seed: int) -> float:
    """How often ``paired`` shows the better of two typical candidates better on n shared
    examples: each candidate passes an example with its mean, the two correlated at 0.5
    (the 2 x 2 table of the plans' assumptions)."""
    high, low = TYPICAL.score + difference / 2, TYPICAL.score - difference / 2
    both = high * low + TYPICAL.correlation * (high * (1 - high) * low * (1 - low)) ** 0.5
    cells = [(both, (1.0, 1.0)), (high - both, (1.0, 0.0)), (low - both, (0.0, 1.0))]
    rng, shown = random.Random(seed), 0
    for _ in range(runs):
        first, second = [], []
        for _ in range(n):
            u, pair = rng.random(), (0.0, 0.0)
            for share, outcome in cells:
                if u < share:
                    pair = outcome
                    break
                u -= share
            first.append(pair[0])
            second.append(pair[1])
        shown += paired(first, second).verdict == "better"
    return shown / runs


@pytest.mark.parametrize("n", [20, 40])
def test_the_detectable_difference_is_shown_about_as_often_as_the_plan_claims(n: int) -> None:
    difference = detectable(n)

    rate = simulated_power(difference, n, runs=300, seed=n)

    # the plan claims 80%; the normal approximation errs on the safe side by a few points
    assert 0.72 <= rate <= 0.95
    # and two equally good candidates are told apart at most the interval's 2.5%
    assert simulated_power(0.0, n, runs=300, seed=n + 1) <= 0.05


def test_precision_grows_with_the_square_root_of_the_examples() -> None:
    assert half_width(5) > 0.5  # the 5-example trials: nothing separates
    assert 0.16 < half_width(40) < 0.17
    assert half_width(160) == pytest.approx(half_width(40) / 2, rel=0.1)
    assert detectable(40) < detectable(20) < detectable(10)
    assert power(0.3, 40) > power(0.2, 40) > power(0.1, 40)


def test_the_examples_a_target_needs() -> None:
    n = examples_for(TYPICAL.target)

    assert n == 55
    assert detectable(n) <= 0.2 < detectable(n - 1)
    assert examples_for(0.2, most=40) == 40
    # a pair that agrees more needs fewer examples
    assert examples_for(0.2, Assumptions(correlation=0.7)) < n


def test_the_figures_a_plan_records_and_prints() -> None:
    figures = separation(40, 3)

    assert figures.describe("trials") == (
        "about 3 trials judged on 40 examples each: +/-17 points,"
        " a 24-point difference shown 80% of the time (20 points need 55 examples each)"
    )
    assert separation(60, 3).describe("trials").endswith("shown 80% of the time")
    assert separation(40, 1).describe("trials").startswith("about 1 trial judged")
    assert separation(40, None).describe().startswith("candidates judged on 40")
    assert "no difference shown reliably" in separation(2, 2).describe()
    assert "a 100-point difference" in separation(3, 2).describe()  # 3 wins of 3

"""Paired evidence and racing (``algorithms.evidence``): verdicts a small batch cannot
support stay undecided, the interval covers the true difference at its stated rate, and a
race keeps the best of near-equal candidates for a fraction of scoring them all."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from emery.algorithms.evidence import flipped, paired, race


def test_a_lucky_five_example_win_is_undecided() -> None:
    # the numbers: 0.8 against 0.6 on five examples
    evidence = paired([1, 1, 1, 1, 0], [1, 1, 1, 0, 0])
    assert evidence.verdict == "undecided"
    assert evidence.difference == pytest.approx(0.2)
    assert evidence.low < 0 < evidence.high
    # even 5 of 5 against 2 of 5 is not enough
    assert paired([1] * 5, [1, 1, 0, 0, 0]).verdict == "undecided"


def test_a_clear_difference_is_decided_both_ways() -> None:
    assert paired([1, 1, 1], [0, 0, 0]).verdict == "better"
    assert paired([1] * 10, [1] * 5 + [0] * 5).verdict == "better"
    worse = paired([0] * 12, [1] * 8 + [0] * 4)
    assert worse.verdict == "worse"
    assert worse.high < 0
    assert flipped(worse).verdict == "better"
    assert (flipped(worse).low, flipped(worse).high) == (-worse.high, -worse.low)


def test_agreement_on_every_example_is_not_a_point_interval() -> None:
    evidence = paired([1] * 5 + [0] * 5, [1] * 5 + [0] * 5)
    assert evidence.verdict == "undecided"
    assert evidence.low < -0.1
    assert evidence.high > 0.1


def test_graded_scores_are_compared_by_their_differences() -> None:
    # a steady graded gain is evidence once there are enough examples; a small one is not
    assert paired([0.75] * 10, [0.5] * 10).verdict == "better"
    assert paired([0.75] * 3, [0.5] * 3).verdict == "undecided"
    assert paired([0.6] * 10, [0.5] * 10).verdict == "undecided"
    assert paired([0.5] * 10, [0.5] * 10).low < -0.1  # no point interval
    assert paired([0.9] * 40, [0.1] * 40).verdict == "better"
    assert paired([0.1] * 40, [0.9] * 40).verdict == "worse"
    assert paired([], []).verdict == "undecided"
    with pytest.raises(ValueError, match="differ in length"):
        paired([1.0], [])


@pytest.mark.parametrize("shift", [0.0, 0.15])
def test_a_graded_interval_covers_the_true_difference_and_rarely_calls_a_tie(
    shift: float,
) -> None:
    """1000 simulated pairs of quarter-step scores (an F1 over four keys, say), n=10: the
    95% interval covers the true difference at least 93% of the time, a tie is called
    ``better`` at most 4% of the time, and a true +0.15 is found more often than not at
    n=40 (treating the scores as 0/1 outcomes found it in under a fifth of runs)."""
    rng = random.Random(5)

    def draw() -> tuple[float, float]:
        level = rng.random()

        def quarter(value: float) -> float:
            return round(min(1.0, max(0.0, value)) * 4) / 4

        return quarter(level + shift + rng.gauss(0, 0.2)), quarter(level + rng.gauss(0, 0.2))

    population = [draw() for _ in range(100_000)]
    true = sum(a - b for a, b in population) / len(population)
    covered = called = 0
    for _ in range(1000):
        pairs = [draw() for _ in range(10)]
        evidence = paired([a for a, _ in pairs], [b for _, b in pairs])
        covered += evidence.low <= true <= evidence.high
        called += evidence.verdict == "better"
    assert covered / 1000 >= 0.93
    if shift == 0.0:
        assert called / 1000 <= 0.04
    else:
        found = sum(
            paired(*zip(*[draw() for _ in range(40)], strict=True)).verdict == "better"
            for _ in range(200)
        )
        assert found / 200 > 0.5


def test_the_interval_covers_the_true_difference_at_the_stated_rate() -> None:
    """2000 simulated pairs of correlated 0/1 scores, n=10: the 95% interval covers the
    true difference (0.7 - 0.5) at least 93% and at most 99.5% of the time (the method
    leans conservative)."""
    rng = random.Random(7)
    first_rate, second_rate, n, trials = 0.7, 0.5, 10, 2000
    covered = 0
    for _ in range(trials):
        first, second = [], []
        for _ in range(n):
            u = rng.random()
            v = u if rng.random() < 0.5 else rng.random()
            first.append(float(u < first_rate))
            second.append(float(v < second_rate))
        evidence = paired(first, second)
        covered += evidence.low <= first_rate - second_rate <= evidence.high
    assert 0.93 <= covered / trials <= 0.995


class TableScorer:
    """Scores from a fixed table; each new (candidate, example) costs one call."""

    def __init__(self, table: dict[str, list[float]], budget: int | None = None) -> None:
        self.table = table
        self.paid: set[tuple[str, int]] = set()
        self.budget = budget

    async def scores(self, candidate_id: str, example_ids: Sequence[str]) -> list[float]:
        self.paid |= {(candidate_id, int(i)) for i in example_ids}
        return [self.table[candidate_id][int(i)] for i in example_ids]

    def cost(self, candidate_id: str, example_ids: Sequence[str]) -> int:
        return sum(1 for i in example_ids if (candidate_id, int(i)) not in self.paid)

    def can_afford(self, calls: int) -> bool:
        return self.budget is None or len(self.paid) + calls <= self.budget


def _scores(rate: float, n: int, rng: random.Random) -> list[float]:
    return [float(rng.random() < rate) for _ in range(n)]


async def test_a_race_keeps_the_best_of_near_equal_candidates_for_a_fraction_of_the_calls() -> None:
    rng = random.Random(3)
    n = 200
    rates = {"best": 0.8, "close": 0.76, "middling": 0.5, "weak": 0.3, "bad": 0.1}
    table = {name: _scores(rate, n, rng) for name, rate in rates.items()}
    scorer = TableScorer(table)

    result = await race(list(table), [str(i) for i in range(n)], scorer, start=10)

    assert result.leader == "best"
    assert "best" in result.survivors
    assert {"middling", "weak", "bad"} <= set(result.dropped)
    assert all(result.evidence[name].verdict == "worse" for name in ("weak", "bad"))
    full = len(table) * n
    assert len(scorer.paid) <= 0.5 * full  # 1000 for scoring all five on all 200
    assert result.dropped["bad"] <= 20  # the clearly bad one goes after one or two rounds


async def test_a_race_stops_where_the_budget_does_and_an_incumbent_wins_ties() -> None:
    table = {"incumbent": [1.0, 0.0] * 10, "challenger": [1.0, 0.0] * 10}
    scorer = TableScorer(table, budget=12)
    result = await race(list(table), [str(i) for i in range(20)], scorer, start=4)
    assert result.leader == "incumbent"
    assert result.n == 4  # the next round (2 x 8 - 8 already paid) would pass the budget
    assert len(scorer.paid) == 8
    assert result.evidence["challenger"].verdict == "undecided"

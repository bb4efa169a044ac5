"""How often GEPA's ``two_stage`` winner guard lets a candidate win, by its true difference
from the seed: one look on val (``winner_examples = 0``) against the confirmation's looks
(val, then 10 further train pairs at a time up to 30, stopped when shown better or behind;
``val_gate.confirm_winner``), both at the guard's level, on simulated paired 0/1 scores.

Each draw pairs a candidate with the seed on 60 examples: with probability ``q`` the two
disagree (the candidate right on half of those, plus half the difference), else both are
right with probability 0.4. Also prints the mean difference a confidence sequence would
need at 60 pairs (Robbins' normal mixture, one-sided, tuned for 60 pairs; Howard et al.
2021, eq. 14), beside what one look at the same level needs.

    .venv/bin/python benchmarks/efficiency/winner_looks.py --draws 3000
"""

from __future__ import annotations

import argparse
import math
import random
from statistics import NormalDist

from emery.algorithms.evidence import paired
from emery.algorithms.winner_confirmation import WINNER_CHUNK, WINNER_CONFIDENCE

VAL = 30
FURTHER = 30


def pairs(rng: random.Random, q: float, difference: float, n: int) -> tuple[list[int], list[int]]:
    """``n`` paired scores of a candidate and the seed (module doc)."""
    mine, seeds = [], []
    for _ in range(n):
        u = rng.random()
        if u < (q + difference) / 2:
            pair = (1, 0)
        elif u < q:
            pair = (0, 1)
        else:
            both = int(rng.random() < 0.4)
            pair = (both, both)
        mine.append(pair[0])
        seeds.append(pair[1])
    return mine, seeds


def wins(mine: list[int], seeds: list[int], further: int) -> bool:
    """Whether the guard lets the candidate win: val first, then the confirmation."""
    evidence = paired(mine[:VAL], seeds[:VAL], WINNER_CONFIDENCE)
    if evidence.verdict == "better":
        return True
    if evidence.difference < 0:
        return False
    for n in range(VAL + WINNER_CHUNK, VAL + further + 1, WINNER_CHUNK):
        evidence = paired(mine[:n], seeds[:n], WINNER_CONFIDENCE)
        if evidence.verdict != "undecided" or evidence.difference < 0:
            return evidence.verdict == "better"
    return False


def mixture_boundary(n: int, variance: float, alpha: float) -> float:
    """The mean difference Robbins' one-sided normal-mixture confidence sequence needs at
    ``n`` pairs of per-pair ``variance``, its mixture tuned to ``n``."""
    v = n * variance
    rho = v
    return math.sqrt(2 * (v + rho) * math.log(math.sqrt((v + rho) / rho) / alpha)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=3000)
    args = parser.parse_args()
    print("| disagreeing pairs | true difference | val alone | val + up to 30 train |")
    print("| --- | --- | --- | --- |")
    for q in (0.2, 0.4):
        for difference in (-0.05, 0.0, 0.07, 0.1):
            rng = random.Random(1)
            draws = [pairs(rng, q, difference, VAL + FURTHER) for _ in range(args.draws)]
            alone = sum(wins(m, s, 0) for m, s in draws) / args.draws
            confirmed = sum(wins(m, s, FURTHER) for m, s in draws) / args.draws
            print(f"| {q} | {difference:+.2f} | {alone:.1%} | {confirmed:.1%} |")
    alpha = (1 - WINNER_CONFIDENCE) / 2
    for q in (0.2, 1 / 3, 0.4):
        one_look = NormalDist().inv_cdf(1 - alpha) * math.sqrt(q / 60)
        print(
            f"at 60 pairs, {q:.2f} disagreeing: one look needs {one_look:.3f}, a confidence"
            f" sequence {mixture_boundary(60, q, alpha):.3f}"
        )


if __name__ == "__main__":
    main()

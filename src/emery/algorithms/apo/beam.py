"""Beam bookkeeping: parents of a round, contenders for full val and the survivors."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from emery.algorithms.evidence import Evidence, flipped


def unique(ids: Iterable[str]) -> list[str]:
    """``ids`` without repeats, first occurrence kept."""
    return list(dict.fromkeys(ids))


def round_parents(beam: Sequence[str], width: int) -> list[str]:
    """``width`` parents taken from the beam in order, repeating members while it is smaller."""
    if not beam:
        raise ValueError("the beam is empty")
    return [beam[i % len(beam)] for i in range(width)]


def select_top(ranked_ids: Sequence[str], scores: Mapping[str, float], width: int) -> list[str]:
    """The ``width`` best ids by score; on a tie the one listed first wins.

    Listing the current beam before its children makes an incumbent keep its place
    against a child that only ties it.
    """
    order = sorted(range(len(ranked_ids)), key=lambda i: (-scores[ranked_ids[i]], i))
    return [ranked_ids[i] for i in order[:width]]


def contenders(
    ranked_ids: Sequence[str], scores: Mapping[str, float], n: int, limit: int
) -> list[str]:
    """Up to ``limit`` ids, best first, whose mean score on the ``n``-example val batch is
    within one standard error of its difference from the best one's.

    The error bound treats each mean as a proportion (``p * (1 - p)`` bounds the variance
    of scores in [0, 1]); a batch of 16 cannot tell 11 right from 9 right, so both go on
    to full val instead of the batch deciding alone.
    """
    ordered = select_top(ranked_ids, scores, len(ranked_ids))
    top = scores[ordered[0]]

    def close(candidate_id: str) -> bool:
        score = scores[candidate_id]
        error = math.sqrt((top * (1 - top) + score * (1 - score)) / max(n, 1))
        return top - score <= error

    return [candidate_id for candidate_id in ordered if close(candidate_id)][:limit]


def keep_incumbents(
    beam: Sequence[str],
    incumbents: Sequence[str],
    ranked: Sequence[str],
    compare: Callable[[str, str], Evidence],
) -> tuple[list[str], dict[str, Evidence]]:
    """``beam`` with every incumbent it leaves out put back unless the evidence shows it
    worse than the newcomer whose place it would take.

    Incumbents left out are taken in ``ranked`` order; each is compared (``compare(
    incumbent, newcomer)``: the incumbent's scores against the newcomer's on their shared
    examples) with the lowest-ranked newcomer still in the beam. ``worse``: the incumbent
    is dropped; ``better`` or ``undecided``: it takes that newcomer's place. Returns the
    beam and, per compared id (both sides), the evidence of that id against the other.
    """
    kept = list(beam)
    evidence: dict[str, Evidence] = {}
    for incumbent in [i for i in ranked if i in incumbents and i not in beam]:
        newcomers = [i for i in kept if i not in incumbents]
        if not newcomers:
            continue
        newcomer = newcomers[-1]
        verdict = compare(incumbent, newcomer)
        evidence[incumbent], evidence[newcomer] = verdict, flipped(verdict)
        if verdict.verdict != "worse":
            kept[kept.index(newcomer)] = incumbent
    return kept, evidence

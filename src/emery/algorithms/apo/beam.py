"""Beam bookkeeping: parents of a round and the survivors of a val batch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


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

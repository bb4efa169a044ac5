"""The second stage of GEPA's ``two_stage`` acceptance: a child that passed the cheap
minibatch filter is scored on val in chunks, paired with its parent's stored val scores.

After each chunk the paired evidence (``algorithms.evidence.paired``) is read: a child
shown worse than its parent stops there (its further val examples are not paid for) and
does not join the pool; a child scored on all of val joins unless the evidence on all of
it shows it worse. The children of one step go chunk by chunk in lock step, each chunk's
evaluations sharing the step's lanes (``concurrent_scoring``). Whether a pool member may
be returned as the winner is decided apart (``pool.winner_gate``): shown better than the
seed on val.
"""

from __future__ import annotations

from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.concurrent_scoring import ScoreRequest, score_concurrently
from emery.algorithms.evidence import Evidence, paired
from emery.algorithms.gepa.state import PoolEntry
from emery.core.models import Candidate
from emery.evaluation.eval_result import EvalResult

VAL_CHUNK = 10
"""Val examples a child is scored on between two looks at its evidence."""


@dataclass
class OnVal:
    """One child on its way through val: its results so far and the last evidence."""

    parent: PoolEntry
    child: Candidate
    results: EvalResult | None = None
    evidence: Evidence | None = None
    stopped: bool = False

    @property
    def joins(self) -> bool:
        """Scored on all of val and not shown worse than its parent there."""
        return not self.stopped and (self.evidence is None or self.evidence.verdict != "worse")

    @property
    def reason(self) -> str | None:
        """Why the child stays out of the pool (None when it joins)."""
        if self.joins or self.evidence is None:
            return None
        where = f"on {self.evidence.n} val examples" if self.stopped else "on val"
        return f"shown worse than its parent {where}: it does not join the pool"


async def score_on_val(
    ctx: SearchContext,
    children: list[tuple[PoolEntry, Candidate]],
    *,
    confidence: float,
    slots: int,
) -> list[OnVal]:
    """Each child scored on val chunk by chunk (module doc), in the order given."""
    items = [OnVal(parent, child) for parent, child in children]
    for start in range(0, len(ctx.val), VAL_CHUNK):
        going = [item for item in items if not item.stopped]
        if not going:
            break
        chunk = ctx.val[start : start + VAL_CHUNK]
        requests = [ScoreRequest(item.child, chunk, "val") for item in going]
        results = await score_concurrently(ctx, requests, slots=slots)
        last = start + VAL_CHUNK >= len(ctx.val)
        for item, result in zip(going, results, strict=True):
            item.results = result if item.results is None else item.results.joined(result)
            item.evidence = _against_parent(item.results, item.parent, confidence)
            worse = item.evidence is not None and item.evidence.verdict == "worse"
            item.stopped = worse and not last
    return items


def _against_parent(results: EvalResult, parent: PoolEntry, confidence: float) -> Evidence | None:
    """The child's val results paired with its parent's on the same examples (None where
    the parent has no val score on them, or the batch is scored by rank agreement)."""
    if results.ranked:
        return None
    pairs = [
        (r.score, parent.val_scores[r.example_id])
        for r in results.results
        if r.example_id in parent.val_scores
    ]
    if not pairs:
        return None
    child, before = zip(*pairs, strict=True)
    return paired(list(child), list(before), confidence)

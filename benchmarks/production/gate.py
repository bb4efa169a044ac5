"""The loop's scripted reviewer: publish a search's best only when its own val examples
show it better than the version being served.

A search starts from the served prompt's text (its seed), so the served version and the
proposed one (the job's best) were both scored on the job's val examples. The reviewer
pairs their stored val scores per example and compares them with
``emery.algorithms.evidence.paired`` at 95%: it publishes when the verdict is ``better``
and otherwise keeps serving the current version, saying why (n, difference, interval).

Why not ``[job] approve``: that gate holds a candidate's becoming the job's best inside a
search (against the current best, step by step, the job waiting for a decision), not the
publish of a finished job's best against the served version, which is the decision here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from emery.algorithms.evidence import CONFIDENCE, Evidence, paired
from emery.reports import published
from emery.store import Store
from emery.store.records import EvaluationFilter


@dataclass(frozen=True)
class Review:
    """The reviewer's decision on one round's proposal, with its evidence."""

    publish: bool
    evidence: Evidence
    decision: str
    """``published``, or ``kept vN`` and why."""

    @property
    def reason(self) -> str:
        """The decision with its evidence (n, difference, interval)."""
        found = self.evidence
        return (
            f"{self.decision} (val: n = {found.n}, proposed - served {found.difference:+.3f}"
            f" [{found.low:+.3f}, {found.high:+.3f}] at {found.confidence:.0%})"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "publish": self.publish,
            "decision": self.decision,
            "reason": self.reason,
            **self.evidence.model_dump(include={"n", "difference", "low", "high", "verdict"}),
        }


def val_scores(store: Store, job_id: str, candidate_id: str) -> dict[str, float]:
    """A candidate's stored val score per example id (a failed run scored 0)."""
    found = store.list_evaluations(
        EvaluationFilter(job_id=job_id, candidate_id=candidate_id, split="val"), limit=None
    )
    return {record.result.example_id: record.result.score for record in found.items}


def decide(
    served: Mapping[str, float], proposed: Mapping[str, float], *, served_version: int
) -> Review:
    """Publish when ``proposed`` is shown better than ``served`` on the examples both were
    scored on (paired, at ``CONFIDENCE``); otherwise keep the served version."""
    shared = sorted(set(served) & set(proposed))
    evidence = paired([proposed[i] for i in shared], [served[i] for i in shared], CONFIDENCE)
    if evidence.verdict == "better":
        return Review(True, evidence, "published: shown better")
    return Review(False, evidence, f"kept v{served_version}: not shown better")


def review(store: Store, job_id: str, served_version: int) -> Review:
    """The decision on ``job_id``'s best against its seed (the served version's text)."""
    _, result, best = published.publishable_best(store, job_id)
    seed = result.seed_candidate
    if seed is None or seed.id == best.id:
        decision = f"kept v{served_version}: the search's best is the served version"
        return Review(False, paired([], []), decision)
    served = val_scores(store, job_id, seed.id)
    return decide(served, val_scores(store, job_id, best.id), served_version=served_version)

"""The loop's scripted reviewer: publish a search's best only when its own val examples
show it better than the version being served.

It goes through emery's publish approval, as a person would (``emery publish --request``,
then approve or reject with a reason): a publish request for the job's best, its review
(``reports.approvals.review``: the candidate beside the prompt's latest version, their
val scores paired per example with ``emery.algorithms.evidence.paired`` at 95%), and a
decision: approve when the verdict is ``better`` (the approval publishes), else reject,
with the evidence as the reason (a warm-started job's proposer reads it). A search starts
from the served prompt's text, so both sides were scored on the job's val examples.
"""

from __future__ import annotations

from dataclasses import dataclass

from emery.algorithms.evidence import Evidence, paired
from emery.reports import approvals
from emery.store import Store


@dataclass(frozen=True)
class Review:
    """The reviewer's decision on one round's proposal, with its evidence."""

    publish: bool
    evidence: Evidence
    decision: str
    """``published: shown better``, or ``kept vN: not shown better``."""
    result: str | None = None
    """What the approval published (``NAME version N``), if anything."""

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
            "result": self.result,
            **self.evidence.model_dump(include={"n", "difference", "low", "high", "verdict"}),
        }


def decide(evidence: Evidence | None, *, served_version: int) -> Review:
    """The rule: publish when the proposal is shown ``better`` than the served version on
    the val examples both were run on; otherwise keep serving it."""
    found = evidence if evidence is not None else paired([], [])
    if found.verdict == "better":
        return Review(True, found, "published: shown better")
    return Review(False, found, f"kept v{served_version}: not shown better")


def review(store: Store, job_id: str, name: str, served_version: int) -> Review:
    """Request to publish ``job_id``'s best as ``name``, review it against ``name``'s latest
    version and approve or reject it by ``decide``, the evidence as the reason."""
    request = approvals.request_publish(store, job_id, name)
    shown = approvals.review(store, request.id)
    found = decide(shown.difference, served_version=served_version)
    action = "approve" if found.publish else "reject"
    decided = approvals.decide(store, request.id, action, reason=found.reason)
    return Review(found.publish, found.evidence, found.decision, decided.result)

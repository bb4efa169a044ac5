"""Telling a broken job from a weak candidate: rollouts that fail for errors, not answers.

A wrong answer, or a reply the parser cannot read (``unreadable``, not failed), is a score.
A task model that cannot be called, a verifier that raises or a run that times out says
nothing about the candidate, and a job whose rollouts mostly fail that way would spend its
whole budget on zeros: ``ErrorWatch`` stops it. ``check_gold`` refuses a dataset without
gold outputs for a verifier that needs them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from emery.core.errors import DataError, EmeryError
from emery.core.example_result import ExampleResult, FailureKind
from emery.core.models import Candidate, Example
from emery.systems.capabilities import ScoresItself

SEED_ERRORS: frozenset[str] = frozenset({"model", "verifier", "timeout", "error"})
"""Failures that are not answers: the seed failing only with these cannot be scored."""

BATCH_ERRORS: frozenset[str] = frozenset({"model", "verifier", "timeout"})
"""Failures no candidate text causes (a system's own exception may be the candidate's)."""

CAUSES: dict[FailureKind, str] = {
    "model": "task model error",
    "timeout": "timeout",
    "error": "system exception",
    "output": "unusable output",
    "verifier": "verifier error",
}


class ErrorPolicy(BaseModel):
    """When failed rollouts stop a job (``[runtime] max_error_rate``, ``min_error_rollouts``)."""

    max_error_rate: float = Field(default=0.5, ge=0.0, le=1.0)
    min_rollouts: int = Field(default=3, ge=1)


class RolloutErrors(EmeryError):
    """Rollouts failed for errors, not wrong answers: the job cannot measure anything."""


def failure_counts(results: Sequence[ExampleResult]) -> tuple[int, int]:
    """(failed, timed out) among ``results``."""
    failed = [r for r in results if r.error is not None]
    return len(failed), sum(1 for r in failed if r.failure == "timeout")


def unreadable_count(results: Sequence[ExampleResult]) -> int:
    """How many of ``results`` are replies the parser could not read (wrong answers)."""
    return sum(1 for r in results if r.unreadable is not None)


def check_gold(system: Any, verifier: Any, examples: Iterable[Example]) -> None:
    """Refuse, before any model call, a dataset without a single gold output when the
    verifier compares with gold outputs and the system does not score itself."""
    scores_itself = isinstance(system, ScoresItself) and system.reports_rewards
    if not getattr(verifier, "needs_expected", False) or scores_itself:
        return
    if any(example.expected is not None for example in examples):
        return
    raise DataError(
        f"no example of the dataset has an expected value, and the {type(verifier).__name__}"
        " verifier compares outputs with it: add an 'expected' column (or name yours in"
        " [dataset.fields] expected_field), or score with a python verifier"
    )


class ErrorWatch:
    """Stops a search whose rollouts fail for errors, not answers (``check``).

    The seed stands for the user's setup: it fails the job when all its rollouts failed
    with errors, or more than ``max_error_rate`` of a batch of at least ``min_rollouts``
    new ones did. Another candidate's text may be what breaks its runs (a prompt too long
    for the model), so its broken batch fails the job only right after a broken batch of
    a different candidate: a model gone down breaks every candidate's runs.
    """

    def __init__(self, policy: ErrorPolicy) -> None:
        self.policy = policy
        self._broken_by: str | None = None  # the candidate of the last broken batch

    def check(
        self,
        candidate: Candidate,
        split: str,
        results: Sequence[ExampleResult],
        fresh: Sequence[ExampleResult],
    ) -> None:
        """Raise ``RolloutErrors`` when ``candidate``'s ``results`` (``fresh``: those not
        known before this batch) show a broken job rather than a weak candidate."""
        is_seed = candidate.lineage.operation == "seed"
        if is_seed and results and all(r.failure in SEED_ERRORS for r in results):
            raise RolloutErrors(_message("the seed", split, results, results))
        broken = [r for r in fresh if r.failure in BATCH_ERRORS]
        if len(fresh) < self.policy.min_rollouts:
            return
        if len(broken) <= self.policy.max_error_rate * len(fresh):
            self._broken_by = None
            return
        limit = f" (runtime.max_error_rate is {self.policy.max_error_rate:.0%})"
        if is_seed:
            raise RolloutErrors(_message("the seed", split, broken, fresh) + limit)
        if self._broken_by not in (None, candidate.id):
            name = f"candidate {candidate.id[:8]}"
            after = f" right after those of candidate {str(self._broken_by)[:8]}"
            raise RolloutErrors(_message(name, split, broken, fresh, after) + limit)
        self._broken_by = candidate.id


def _message(
    name: str,
    split: str,
    failed: Sequence[ExampleResult],
    of: Sequence[ExampleResult],
    after: str = "",
) -> str:
    """One line: how many rollouts failed, why, and the first error."""
    kinds = Counter(r.failure for r in failed if r.failure is not None)
    causes = ", ".join(f"{CAUSES[kind]}: {count}" for kind, count in kinds.most_common())
    example = " ".join(str(failed[0].error).split())
    if len(example) > 300:
        example = example[:299] + "…"
    return (
        f"{len(failed)} of {len(of)} rollouts of {name} on {split} failed with errors,"
        f" not answers{after} ({causes}); e.g. example {failed[0].example_id}: {example}"
    )

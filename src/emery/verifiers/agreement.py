"""Agreement with gold scores: how a verifier graph (``graph_type = "verifier"``) is scored.

A verifier graph's dataset rows are traces (input fields such as ``input``, ``output``,
``transcript``) whose gold output is the score the trace deserves, in [0, 1]. The graph's
output is read as a score (``score_of``) and the example scores ``1 - |score - gold|``, so
a job's mean is one minus the mean absolute error. The feedback says which way the graph
was off (too lenient, too harsh), which is what reflection needs to correct it.

With ``[verifier] agreement = "rank"`` (``RankAgreement``) the job is scored by rank
agreement instead: Spearman's rho between the graph's scores and the gold scores over each
evaluated batch, mapped to ``(1 + rho) / 2`` (``evaluation.rank``). Each example still
scores ``1 - |score - gold|`` with the same feedback, and also records its (score, gold)
pair, from which the batch's score is computed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from emery.core.models import Example
from emery.verifiers.base import SyncVerifier, Verdict, clip

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
SCORE_KEYS = ("score", "reward")
FEEDBACK_KEYS = ("feedback", "reason", "reasoning")


def score_of(value: Any) -> float:
    """A score in [0, 1] read from a graph's output or a gold value: a number, a mapping
    with a ``score`` (or ``reward``) key, or text (JSON of either, else its first number).
    ValueError when there is none or it lies outside [0, 1]."""
    if isinstance(value, str):
        try:
            return score_of(json.loads(value))
        except (ValueError, TypeError):
            found = NUMBER.search(value)
            if found is None:
                raise ValueError(f"no score in {clip(value, 60)!r}") from None
            value = float(found.group())
    if isinstance(value, Mapping):
        key = next((key for key in SCORE_KEYS if key in value), None)
        if key is None:
            raise ValueError(f"no score key ({', '.join(SCORE_KEYS)}) in {clip(str(value), 60)}")
        return score_of(value[key])
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"no score in {clip(str(value), 60)!r}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"score {value} is outside [0, 1]")
    return float(value)


class GraphVerdict(Verdict):
    """What a verifier graph says of one trace: a verdict (score in [0, 1], its reasons) and
    the graph's whole output (per-criterion scores, say)."""

    output: Any = None


def reward_of(output: Any) -> GraphVerdict:
    """The structured reward in a verifier graph's output (ValueError without a score)."""
    feedback = ""
    value = output
    if isinstance(output, str):
        try:
            value = json.loads(output)
        except ValueError:
            feedback = output
    if isinstance(value, Mapping):
        feedback = next((str(value[key]) for key in FEEDBACK_KEYS if key in value), "")
    return GraphVerdict(score=score_of(output), feedback=feedback, output=output)


class Agreement(SyncVerifier):
    """``1 - |score - gold|`` for a verifier graph's output (see the module docstring)."""

    needs_expected = True

    def check(self, example: Example, output: Any) -> Verdict:
        try:
            gold = score_of(example.expected)
        except ValueError as exc:
            return Verdict(score=0.0, feedback=f"example {example.id}: gold score: {exc}")
        try:
            score = score_of(output)
        except ValueError as exc:
            return Verdict(
                score=0.0,
                feedback=f"The output should be a score in [0, 1] ({exc}); the gold score is"
                f" {gold:.2f}.",
            )
        return self.agreement(score, gold)

    def agreement(self, score: float, gold: float) -> Verdict:
        """The verdict on a readable ``score`` against ``gold``."""
        error = score - gold
        if abs(error) < 1e-9:
            return Verdict(score=1.0, feedback=f"Scored {score:.2f}, as the gold score.")
        way = "too lenient" if error > 0 else "too harsh"
        return Verdict(
            score=max(0.0, 1.0 - abs(error)),
            feedback=f"Scored {score:.2f} but the gold score is {gold:.2f}: {way} by"
            f" {abs(error):.2f}.",
        )


class RankAgreement(Agreement):
    """``Agreement`` whose batch score is rank agreement (see the module docstring): the
    verdict carries the (score, gold) pair; a run without a readable score has none."""

    def agreement(self, score: float, gold: float) -> Verdict:
        return super().agreement(score, gold).model_copy(update={"ranked": (score, gold)})

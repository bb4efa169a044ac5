"""The ``feedback`` verifier: the feedback a recorded reply got, carried to a new output.

A dataset built from traces keeps each call's recorded reply as ``expected`` and the
feedback on it (a score in [0, 1]; a thumb up is 1, down 0) as ``meta["feedback"]``. A
new output is scored ``s * f + (1 - s) * 0.5``, where ``f`` is the feedback and ``s`` the
output's similarity to the recorded reply (token F1): as far as the output is the recorded
reply it earns that reply's rating, and as far as it is something else nothing is known of
it (0.5). So repeating a badly rated reply scores 0 and an output unlike it 0.5, never
more: a reply that is merely different (another wrong label, a sentence the application
cannot read) is not rewarded as if it were right. An example without feedback scores 0.5
whatever the output (it cannot tell candidates apart, and it does not pull them anywhere).
"""

from __future__ import annotations

from typing import Any

from emery.core.models import Example
from emery.verifiers.base import SyncVerifier, Verdict
from emery.verifiers.text import TokenF1

NEUTRAL = 0.5


def feedback_of(example: Example) -> float | None:
    """The feedback score an example carries (``meta["feedback"]["score"]``), if any."""
    found = example.meta.get("feedback")
    score = found.get("score") if isinstance(found, dict) else None
    if isinstance(score, bool) or not isinstance(score, int | float) or score != score:
        return None
    return min(1.0, max(0.0, float(score)))


class FeedbackScore(SyncVerifier):
    """Scores an output by the feedback on the recorded reply it resembles."""

    needs_expected = True

    def __init__(self) -> None:
        self.similarity = TokenF1()

    def check(self, example: Example, output: Any) -> Verdict:
        feedback = feedback_of(example)
        if feedback is None:
            return Verdict(score=NEUTRAL, feedback="No feedback on this example: scored 0.5.")
        similar = self.similarity.check(example, output).score
        score = similar * feedback + (1 - similar) * NEUTRAL
        rated = "well" if feedback >= NEUTRAL else "badly"
        aim = "closer to" if feedback >= NEUTRAL else "further from"
        return Verdict(
            score=min(1.0, max(0.0, score)),
            feedback=(
                f"The recorded reply was rated {feedback:.2f} ({rated}); the answer's token"
                f" overlap with it is {similar:.2f}. Move {aim} that reply."
                + ("" if feedback >= NEUTRAL else " A different reply is not known to be right.")
            ),
        )

"""``scoring = "logprobs"``: a judge's score as the expected grade under its token probabilities.

A small judge asked for a JSON verdict tends to write the same number for every answer;
the probabilities it puts on each grade still differ (G-Eval). ``GradeProbabilities`` asks
the judge for one whole-number grade from 1 to 5 on the first line, then one sentence, with
the likeliest tokens per reply position (``top_logprobs``). The score is the expected grade
over the grade tokens among the likeliest at the first position whose likeliest token is a
grade (their probabilities renormalised to sum to 1), mapped to [0, 1]: grade 1 is 0, grade
5 is 1. A model that gives no token probabilities (an endpoint without ``logprobs``) has its
grade read from the reply's text instead: counted in ``stats.text_grades`` and logged once
per verifier.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emery.core.models import ChatMessage, Example
from emery.lm.base import Completion, TokenChoice, TokenTrace
from emery.verifiers.base import Verdict
from emery.verifiers.judge import JudgeReplyError, JudgeVerifier

log = logging.getLogger(__name__)

GRADES = (1, 2, 3, 4, 5)
TOP_LOGPROBS = 10
"""The likeliest tokens asked for per reply position: enough to hold every grade a small
model gives any weight."""

MAX_TOKENS = 64
"""The grade and one sentence."""

GRADE_SYSTEM = (
    "You are a strict, fair grader. You grade an answer to a task and reply exactly in the"
    " format asked for: the grade alone on the first line, then one sentence."
)

_TEXT_GRADE = re.compile(r"(?<![\d.])([1-5])(?![\d.])")


@dataclass(frozen=True)
class GradeDistribution:
    """The judge's probability of each grade (renormalised over the grades) at the grade's
    position, and the share of the likeliest tokens' probability the grades held there."""

    probabilities: dict[int, float]
    mass: float

    @property
    def expected(self) -> float:
        """The expected grade."""
        return sum(grade * p for grade, p in self.probabilities.items())


_GRADE_TOKENS = {str(grade): grade for grade in GRADES}


def grade_of(token: str) -> int | None:
    """The grade a token spells (``"4"``, ``" 4"``), or None."""
    return _GRADE_TOKENS.get(token.strip())


def grade_distribution(tokens: TokenTrace | None) -> GradeDistribution | None:
    """The grade probabilities at the first reply position whose likeliest token is a grade;
    None when the reply carries no top log-probabilities or no such position."""
    if tokens is None or not tokens.completion_top_logprobs:
        return None
    for choices in tokens.completion_top_logprobs:
        if choices and grade_of(choices[0].token) is not None:
            return _distribution(choices)
    return None


def _distribution(choices: Sequence[TokenChoice]) -> GradeDistribution:
    weights: dict[int, float] = {}
    for choice in choices:
        grade = grade_of(choice.token)
        if grade is not None:
            weights[grade] = weights.get(grade, 0.0) + math.exp(choice.logprob)
    total = sum(weights.values())
    probabilities = {grade: weights[grade] / total for grade in sorted(weights, reverse=True)}
    listed = sum(math.exp(choice.logprob) for choice in choices)
    return GradeDistribution(probabilities, total / listed if listed else 0.0)


def text_grade(text: str) -> int:
    """The first grade written in the reply; ``JudgeReplyError`` when there is none."""
    match = _TEXT_GRADE.search(text)
    if match is None:
        raise JudgeReplyError("no grade from 1 to 5 in the reply")
    return int(match.group(1))


def scaled(grade: float) -> float:
    """A grade on 1-5 as a score in [0, 1]."""
    return min(1.0, max(0.0, (grade - GRADES[0]) / (GRADES[-1] - GRADES[0])))


def reason_of(text: str) -> str:
    """The judge's sentence: the reply after its first line, on one line."""
    _, _, rest = text.strip().partition("\n")
    return " ".join(rest.split()).rstrip(". ")


class GradeProbabilities:
    """Asks for a 1-5 grade and scores its expected value under the judge's token
    probabilities (see the module doc)."""

    name = "logprobs"
    params: Mapping[str, Any] = {
        "logprobs": True,
        "top_logprobs": TOP_LOGPROBS,
        "max_tokens": MAX_TOKENS,
    }

    def messages(self, verifier: JudgeVerifier, example: Example, output: Any) -> list[ChatMessage]:
        grading = verifier.grading(example, output)
        ask = (
            f"Grade the answer with one whole number from 1 ({grading.lowest}) to 5"
            f" ({grading.highest}). Write the grade alone on the first line, then one"
            " sentence that says what is missing or wrong."
        )
        return [
            {"role": "system", "content": GRADE_SYSTEM},
            {"role": "user", "content": f"{grading.brief.strip()}\n\n{ask}"},
        ]

    def verdict(self, verifier: JudgeVerifier, example: Example, reply: Completion) -> Verdict:
        reason = reason_of(reply.text)
        distribution = grade_distribution(reply.tokens)
        if distribution is not None:
            shares = ", ".join(f"{g} {p:.0%}" for g, p in distribution.probabilities.items())
            grade = distribution.expected
            how = f"expected grade over the judge's probabilities: {shares}"
        else:
            if reply.tokens is None or reply.tokens.completion_top_logprobs is None:
                self._note_no_logprobs(verifier, reply)
            grade = float(text_grade(reply.text))
            how = "read from the reply's text"
        score = scaled(grade)
        feedback = f"Judge grade {grade:.2f} of 5, score {score:.2f} ({how})."
        return Verdict(score=score, feedback=f"{feedback} {reason}." if reason else feedback)

    @staticmethod
    def _note_no_logprobs(verifier: JudgeVerifier, reply: Completion) -> None:
        verifier.stats.text_grades += 1
        if verifier.stats.text_grades == 1:
            log.warning(
                "the %s judge's model %s gave no token probabilities; its grades are read"
                " from the reply's text (scoring = 'logprobs' needs a model that returns"
                " top_logprobs)",
                verifier.kind,
                reply.model or "(unnamed)",
            )


GRADE_PROBABILITIES = GradeProbabilities()

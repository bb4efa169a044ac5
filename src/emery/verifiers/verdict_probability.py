"""``scoring = "logprobs"``: a judge's score as the probability it gives to "Yes".

A small judge asked for a JSON verdict tends to write the same score for every answer; the
probability it puts on its first verdict token still moves with the answer (the G-Eval
idea). ``VerdictProbability`` asks the judge a yes/no question about the answer (the
verifier's ``grading_question`` on its ``grading_brief``: does it meet the criteria?), to be
answered with Yes or No and then one sentence, and asks for the likeliest tokens per reply
position (``top_logprobs``). The score is P(Yes) / (P(Yes) + P(No)) over the verdict tokens
among the likeliest at the first position whose likeliest token is a verdict (``Yes``,
``" yes"``, ``No``, ...). On the local 0.5B model a yes/no question separated right from
wrong replies where the expected value of a 1-5 grade did not
(``benchmarks/production/README.md``, "Judge agreement"). A model that gives no token
probabilities (an endpoint without ``logprobs``) has its verdict read from the reply's text
instead (1 or 0): counted in ``stats.text_verdicts`` and logged once per verifier.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from emery.core.models import ChatMessage, Example
from emery.lm.base import Completion, TokenChoice, TokenTrace
from emery.verifiers.base import Verdict
from emery.verifiers.judge import JudgeReplyError, JudgeVerifier

log = logging.getLogger(__name__)

TOP_LOGPROBS = 10
"""The likeliest tokens asked for per reply position: enough to hold both verdicts."""

MAX_TOKENS = 48
"""The verdict and one sentence."""

VERDICT_SYSTEM = (
    "You are a strict, fair grader. You judge an answer to a task and reply exactly in the"
    " format asked for: Yes or No first, then one sentence."
)

_VERDICTS = {"yes": True, "no": False}
_TEXT_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def verdict_of(token: str) -> bool | None:
    """The verdict a token spells (``"Yes"``, ``" no"``), or None."""
    return _VERDICTS.get(token.strip().lower())


def probability_of_yes(tokens: TokenTrace | None) -> float | None:
    """P(Yes) renormalised over the two verdicts at the first reply position whose likeliest
    token is a verdict; None when the reply carries no top log-probabilities or no such
    position."""
    if tokens is None or not tokens.completion_top_logprobs:
        return None
    for choices in tokens.completion_top_logprobs:
        if choices and verdict_of(choices[0].token) is not None:
            return _yes_share(choices)
    return None


def _yes_share(choices: Sequence[TokenChoice]) -> float:
    weights = {True: 0.0, False: 0.0}
    for choice in choices:
        verdict = verdict_of(choice.token)
        if verdict is not None:
            weights[verdict] += math.exp(choice.logprob)
    return weights[True] / (weights[True] + weights[False])


def text_verdict(text: str) -> bool:
    """The first Yes or No written in the reply; ``JudgeReplyError`` when there is none."""
    match = _TEXT_VERDICT.search(text)
    if match is None:
        raise JudgeReplyError("no Yes or No in the reply")
    return _VERDICTS[match.group(1).lower()]


def reason_of(text: str) -> str:
    """The judge's sentence: the reply after its leading Yes or No, on one line."""
    rest = re.sub(r"^\W*(yes|no)\b\W*", "", text.strip(), count=1, flags=re.IGNORECASE)
    sentence = " ".join(rest.split()).rstrip(". ")
    return sentence[:1].upper() + sentence[1:]


class VerdictProbability:
    """Asks a yes/no question and scores the judge's probability of Yes (see the module
    doc)."""

    name = "logprobs"
    params: Mapping[str, Any] = {
        "logprobs": True,
        "top_logprobs": TOP_LOGPROBS,
        "max_tokens": MAX_TOKENS,
    }

    def messages(self, verifier: JudgeVerifier, example: Example, output: Any) -> list[ChatMessage]:
        brief = verifier.grading_brief(example, output).strip()
        ask = (
            f"{verifier.grading_question} Answer Yes or No, then one sentence that says what"
            " is missing or wrong."
        )
        return [
            {"role": "system", "content": VERDICT_SYSTEM},
            {"role": "user", "content": f"{brief}\n\n{ask}"},
        ]

    def verdict(self, verifier: JudgeVerifier, example: Example, reply: Completion) -> Verdict:
        reason = reason_of(reply.text)
        yes = probability_of_yes(reply.tokens)
        if yes is not None:
            score = yes
            said = f"Judge P(yes) {score:.2f}"
        else:
            given = reply.tokens is not None and reply.tokens.completion_top_logprobs is not None
            if not given:
                self._note_no_logprobs(verifier, reply)
            score = 1.0 if text_verdict(reply.text) else 0.0
            why = "no verdict among its likeliest tokens" if given else "no token probabilities"
            said = f"Judge said {'yes' if score else 'no'} ({why})"
        question = verifier.grading_question.rstrip("?")
        feedback = f"{said}: {question[0].lower()}{question[1:]}?"
        return Verdict(score=score, feedback=f"{feedback} {reason}." if reason else feedback)

    @staticmethod
    def _note_no_logprobs(verifier: JudgeVerifier, reply: Completion) -> None:
        verifier.stats.text_verdicts += 1
        if verifier.stats.text_verdicts == 1:
            log.warning(
                "the %s judge's model %s gave no token probabilities; its verdicts are read"
                " from the reply's text (scoring = 'logprobs' needs a model that returns"
                " top_logprobs)",
                verifier.kind,
                reply.model or "(unnamed)",
            )


VERDICT_PROBABILITY = VerdictProbability()

"""``scoring = "logprobs"``: a judge's score as its expected 1-5 grade under the grade
tokens' probabilities, with a scripted judge."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import pytest

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Example
from emery.lm import Completion, FakeLM
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.verifiers.contrastive import ContrastiveJudge
from emery.verifiers.grade_scoring import GRADE_PROBABILITIES
from emery.verifiers.judge import JSON_VERDICT
from emery.verifiers.rubric import Criterion, RubricJudge

CRITERIA = [Criterion(name="correct", description="The total is right.")]
EXAMPLE = Example(id="e1", input={"question": "2 + 3?"}, expected="5")


def probabilities(**shares: float) -> dict[str, float]:
    """Top log-probabilities from probabilities; ``_4`` spells the token ``" 4"``."""
    return {name.replace("_", " "): math.log(p) for name, p in shares.items()}


def graded(reply: str, *alternatives: dict[str, float]) -> RubricJudge:
    lm = FakeLM([reply], model="fake/judge", alternatives=list(alternatives))
    return RubricJudge(CRITERIA, judge=lm, scoring=GRADE_PROBABILITIES)


async def test_the_score_is_the_expected_grade_under_the_grade_tokens_probabilities() -> None:
    verifier = graded("4\nThe total is right.", {"4": math.log(0.6), "3": math.log(0.3), "5": -2.3})
    verdict = await verifier.verify(EXAMPLE, "5")
    share_5 = math.exp(-2.3) / (0.9 + math.exp(-2.3))
    expected = (4 * 0.6 + 3 * 0.3) / (0.9 + math.exp(-2.3)) + 5 * share_5
    assert verdict.score == pytest.approx((expected - 1) / 4)
    assert verdict.feedback.startswith(f"Judge grade {expected:.2f} of 5, score")
    assert verdict.feedback.endswith("The total is right.")
    assert isinstance(verifier.judge, FakeLM)
    prompt = verifier.judge.calls[0][-1]["content"]
    assert "## Answer\n5" in prompt
    assert "1. correct: The total is right." in prompt
    assert "one whole number from 1" in prompt
    assert verifier.stats.text_grades == 0


async def test_grade_probabilities_are_renormalised_over_the_grade_tokens_only() -> None:
    # "The" is not a grade; " 4" and "4" are the same grade
    verifier = graded("4 ok", probabilities(**{"4": 0.3, "_4": 0.2, "The": 0.3, "2": 0.2}))
    verdict = await verifier.verify(EXAMPLE, "5")
    assert verdict.score == pytest.approx(((4 * 0.5 + 2 * 0.2) / 0.7 - 1) / 4)


async def test_the_grade_is_read_where_the_likeliest_token_first_is_a_grade() -> None:
    verifier = graded(
        "Grade: 2 wrong total",
        probabilities(Grade=0.9, **{"5": 0.1}),  # a grade here, but not the likeliest token
        probabilities(**{"2": 0.5, "1": 0.5}),
    )
    assert (await verifier.verify(EXAMPLE, "6")).score == pytest.approx(0.125)


class NoLogprobsLM:
    """A judge model that never gives token probabilities (an endpoint without them)."""

    model = "plain/judge"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.params: list[dict[str, Any]] = []

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.params.append(params)
        return Completion(text=self.reply, model=self.model)


async def test_without_logprobs_the_grade_is_read_from_the_text_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lm = NoLogprobsLM("3\nHalf right.")
    verifier = RubricJudge(CRITERIA, judge=lm, scoring=GRADE_PROBABILITIES)
    with caplog.at_level(logging.WARNING, logger="emery.verifiers.grade_scoring"):
        first = await verifier.verify(EXAMPLE, "5")
        await verifier.verify(EXAMPLE, "5")
    assert lm.params[0] == {"logprobs": True, "top_logprobs": 10, "max_tokens": 64}
    assert first.score == 0.5
    assert "read from the reply's text" in first.feedback
    assert verifier.stats.text_grades == 2
    warnings = [r for r in caplog.records if "no token probabilities" in r.getMessage()]
    assert len(warnings) == 1


async def test_a_reply_without_any_grade_scores_0_and_counts_as_unreadable() -> None:
    verifier = graded("Excellent work", probabilities(Excellent=0.9, **{"5": 0.1}))
    verdict = await verifier.verify(EXAMPLE, "5")
    assert verdict.score == 0.0
    assert "no grade from 1 to 5" in verdict.feedback
    assert verifier.stats.unreadable == 1


def test_scoring_is_a_config_choice_of_the_graded_judges_json_by_default() -> None:
    rubric = {"kind": "rubric", "criteria": [{"name": "correct"}]}
    default = build_verifier(VerifierConfig.model_validate(rubric))
    assert isinstance(default, RubricJudge)
    assert default.scoring is JSON_VERDICT
    chosen = build_verifier(VerifierConfig.model_validate({**rubric, "scoring": "logprobs"}))
    assert isinstance(chosen, RubricJudge)
    assert chosen.scoring is GRADE_PROBABILITIES
    contrastive = build_verifier(
        VerifierConfig.model_validate({"kind": "contrastive", "scoring": "logprobs"})
    )
    assert isinstance(contrastive, ContrastiveJudge)
    assert contrastive.scoring is GRADE_PROBABILITIES
    # the default leaves the evaluation scope as it was, so stored results are reused
    assert "scoring" not in VerifierConfig.model_validate(rubric).scope_settings()


def test_a_bad_scoring_value_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError) as error:
        VerifierConfig.model_validate({"kind": "rubric", "scoring": "probs"})
    message = str(error.value)
    assert "verifier.scoring" in message
    assert "logprobs" in message
    assert "\n" not in message

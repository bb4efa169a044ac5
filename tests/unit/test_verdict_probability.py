"""``scoring = "logprobs"``: a judge's score as its probability of Yes to a yes/no question,
with a scripted judge."""

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
from emery.verifiers.judge import JSON_VERDICT
from emery.verifiers.rubric import Criterion, RubricJudge
from emery.verifiers.verdict_probability import VERDICT_PROBABILITY

CRITERIA = [Criterion(name="correct", description="The total is right.")]
EXAMPLE = Example(id="e1", input={"question": "2 + 3?"}, expected="5")


def probabilities(**shares: float) -> dict[str, float]:
    """Top log-probabilities from probabilities; ``_yes`` spells the token ``" yes"``."""
    return {name.replace("_", " "): math.log(p) for name, p in shares.items()}


def asked(reply: str, *alternatives: dict[str, float]) -> RubricJudge:
    lm = FakeLM([reply], model="fake/judge", alternatives=list(alternatives))
    return RubricJudge(CRITERIA, judge=lm, scoring=VERDICT_PROBABILITY)


async def test_the_score_is_the_judges_probability_of_yes() -> None:
    verifier = asked("Yes the total is right.", probabilities(Yes=0.6, No=0.3))
    verdict = await verifier.verify(EXAMPLE, "5")
    assert verdict.score == pytest.approx(0.6 / 0.9)
    assert verdict.feedback == (
        "Judge P(yes) 0.67: does the answer meet the criteria? The total is right."
    )
    assert isinstance(verifier.judge, FakeLM)
    prompt = verifier.judge.calls[0][-1]["content"]
    assert "## Answer\n5" in prompt
    assert "1. correct: The total is right." in prompt
    assert prompt.endswith(
        "Does the answer meet the criteria? Answer Yes or No, then one sentence that says"
        " what is missing or wrong."
    )
    assert verifier.stats.text_verdicts == 0


async def test_verdict_probabilities_are_renormalised_over_the_verdict_tokens_only() -> None:
    # "The" is no verdict; "Yes", " yes" and "YES" are one verdict
    verifier = asked("Yes", probabilities(Yes=0.3, _yes=0.1, YES=0.1, The=0.3, No=0.2))
    assert (await verifier.verify(EXAMPLE, "5")).score == pytest.approx(0.5 / 0.7)


async def test_the_verdict_is_read_where_the_likeliest_token_first_is_a_verdict() -> None:
    verifier = asked(
        "Verdict: No, it is 6",
        probabilities(**{"Verdict:": 0.9, "Yes": 0.1}),  # a verdict here, not the likeliest
        probabilities(No=0.8, Yes=0.2),
    )
    assert (await verifier.verify(EXAMPLE, "6")).score == pytest.approx(0.2)


class NoLogprobsLM:
    """A judge model that never gives token probabilities (an endpoint without them)."""

    model = "plain/judge"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.params: list[dict[str, Any]] = []

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.params.append(params)
        return Completion(text=self.reply, model=self.model)


async def test_without_logprobs_the_verdict_is_read_from_the_text_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lm = NoLogprobsLM("No. The total is 6.")
    verifier = RubricJudge(CRITERIA, judge=lm, scoring=VERDICT_PROBABILITY)
    with caplog.at_level(logging.WARNING, logger="emery.verifiers.verdict_probability"):
        first = await verifier.verify(EXAMPLE, "6")
        lm.reply = "yes"
        second = await verifier.verify(EXAMPLE, "5")
    assert lm.params[0] == {"logprobs": True, "top_logprobs": 10, "max_tokens": 48}
    assert (first.score, second.score) == (0.0, 1.0)
    assert first.feedback.startswith("Judge said no (no token probabilities)")
    assert first.feedback.endswith("The total is 6.")
    assert verifier.stats.text_verdicts == 2
    warnings = [r for r in caplog.records if "no token probabilities" in r.getMessage()]
    assert len(warnings) == 1


async def test_a_text_verdict_beside_token_probabilities_says_they_held_no_verdict() -> None:
    # a sampled "Yes" where "Sure" was likelier: read from the text, though probabilities came
    verifier = asked("Yes it is", probabilities(Sure=0.7, Yes=0.2))
    verdict = await verifier.verify(EXAMPLE, "5")
    assert verdict.score == 1.0
    assert verdict.feedback.startswith("Judge said yes (no verdict among its likeliest tokens)")
    assert verifier.stats.text_verdicts == 0


async def test_a_reply_without_a_verdict_scores_0_and_counts_as_unreadable() -> None:
    verifier = asked("Excellent work", probabilities(Excellent=0.9, Yes=0.1))
    verdict = await verifier.verify(EXAMPLE, "5")
    assert verdict.score == 0.0
    assert "no Yes or No in the reply" in verdict.feedback
    assert verifier.stats.unreadable == 1


async def test_the_contrastive_judge_asks_about_the_reference_answer() -> None:
    lm = FakeLM(["No"], alternatives=[probabilities(No=0.75, Yes=0.25)])
    verifier = ContrastiveJudge(lm, scoring=VERDICT_PROBABILITY)
    assert (await verifier.verify(EXAMPLE, "6")).score == pytest.approx(0.25)
    prompt = lm.calls[0][-1]["content"]
    assert "## Reference answer\n5" in prompt
    assert "Does the answer state every fact of the reference answer" in prompt


def test_scoring_is_a_config_choice_of_the_rubric_and_contrastive_judges() -> None:
    rubric = {"kind": "rubric", "criteria": [{"name": "correct"}]}
    default = build_verifier(VerifierConfig.model_validate(rubric))
    assert isinstance(default, RubricJudge)
    assert default.scoring is JSON_VERDICT
    chosen = build_verifier(VerifierConfig.model_validate({**rubric, "scoring": "logprobs"}))
    assert isinstance(chosen, RubricJudge)
    assert chosen.scoring is VERDICT_PROBABILITY
    contrastive = build_verifier(
        VerifierConfig.model_validate({"kind": "contrastive", "scoring": "logprobs"})
    )
    assert isinstance(contrastive, ContrastiveJudge)
    assert contrastive.scoring is VERDICT_PROBABILITY
    # the default leaves the evaluation scope as it was, so stored results are reused
    assert "scoring" not in VerifierConfig.model_validate(rubric).scope_settings()
    chosen_scope = VerifierConfig.model_validate({**rubric, "scoring": "logprobs"})
    assert chosen_scope.scope_settings()["scoring"] == "logprobs"


def test_a_bad_scoring_value_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError) as error:
        VerifierConfig.model_validate({"kind": "rubric", "scoring": "probs"})
    message = str(error.value)
    assert message == (
        "verifier.scoring: unknown judge scoring 'probs'; known judge scorings: json, logprobs"
        " (or name one as 'module:attr')"
    )

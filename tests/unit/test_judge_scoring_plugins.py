"""A judge's scoring is a plug-in (``verifiers/judge.py:JUDGE_SCORINGS``): ``[verifier]
scoring`` names a ``JudgeScoring``, a built-in (``json``, ``logprobs``), an
``emery.judge_scorings`` entry point or ``module:attr``, checked when the config is read;
an unknown one is one line listing the known ones."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from emery.core import plugins
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Example
from emery.lm import Completion, FakeLM
from emery.verifiers.base import Verdict
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.verifiers.contrastive import ContrastiveJudge
from emery.verifiers.judge import (
    JSON_VERDICT,
    JUDGE_SCORINGS,
    JudgeReplyError,
    JudgeScoring,
    JudgeVerifier,
    judge_scoring,
)
from emery.verifiers.rubric import RubricJudge
from emery.verifiers.verdict_probability import VERDICT_PROBABILITY

EXAMPLE = Example(id="e1", input={"question": "2 + 3?"}, expected="5")
RUBRIC = {"kind": "rubric", "criteria": [{"name": "correct", "description": "Right total."}]}


class GradeLetter:
    """Asks for a letter grade A-E about the verifier's own brief and scores A as 1, E as 0."""

    name = "grade_letter"
    params: Mapping[str, Any] = {"max_tokens": 2}

    def messages(self, verifier: JudgeVerifier, example: Example, output: Any) -> list[ChatMessage]:
        brief = verifier.grading_brief(example, output)
        return [{"role": "user", "content": f"{brief}\n\nGrade it A to E; reply with the letter."}]

    def verdict(self, verifier: JudgeVerifier, example: Example, reply: Completion) -> Verdict:
        letter = reply.text.strip()[:1].upper()
        if letter not in "ABCDE" or not letter:
            raise JudgeReplyError(f"no grade letter in {reply.text!r}")
        return Verdict(score=(ord("E") - ord(letter)) / 4, feedback=f"grade {letter}")


GRADE_LETTER = GradeLetter()
NOT_A_SCORING = object()


def test_the_built_in_scorings_still_resolve() -> None:
    assert judge_scoring("json") is JSON_VERDICT
    assert judge_scoring("logprobs") is VERDICT_PROBABILITY
    built = build_verifier(VerifierConfig.model_validate({**RUBRIC, "scoring": "logprobs"}))
    assert isinstance(built, RubricJudge)
    assert built.scoring is VERDICT_PROBABILITY


async def test_a_module_attr_scoring_grades_end_to_end() -> None:
    ref = f"{__name__}:GRADE_LETTER"
    config = VerifierConfig.model_validate({**RUBRIC, "scoring": ref})
    assert config.scope_settings()["scoring"] == ref  # a change of scoring is a new scope
    judge = FakeLM(["B, mostly", "well..."], model="fake/judge")
    verifier = build_verifier(config, judge)
    assert isinstance(verifier, RubricJudge)
    assert verifier.scoring is GRADE_LETTER
    verdict = await verifier.verify(EXAMPLE, "5")
    assert (verdict.score, verdict.feedback) == (0.75, "grade B")
    prompt = judge.calls[0][-1]["content"]
    assert "correct: Right total." in prompt  # the rubric's own brief
    assert prompt.endswith("Grade it A to E; reply with the letter.")
    unreadable = await verifier.verify(EXAMPLE, "5")  # "well..." holds no grade
    assert unreadable.score == 0.0
    assert verifier.stats.unreadable == 1


async def test_an_entry_point_scoring_serves_the_contrastive_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = EntryPoint(
        name="grade_letter", value=f"{__name__}:GRADE_LETTER", group="emery.judge_scorings"
    )
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [entry] if group == entry.group else []
    )
    assert JUDGE_SCORINGS.names() == ["grade_letter", "json", "logprobs"]
    config = VerifierConfig.model_validate({"kind": "contrastive", "scoring": "grade_letter"})
    verifier = build_verifier(config, FakeLM(["A"], model="fake/judge"))
    assert isinstance(verifier, ContrastiveJudge)
    assert (await verifier.verify(EXAMPLE, "5")).score == 1.0


def test_a_scoring_object_meets_the_protocol() -> None:
    assert isinstance(GRADE_LETTER, JudgeScoring)
    assert not isinstance(NOT_A_SCORING, JudgeScoring)


@pytest.mark.parametrize(
    ("scoring", "expected"),
    [
        (
            "probs",
            "verifier.scoring: unknown judge scoring 'probs'; known judge scorings: json,"
            " logprobs (or name one as 'module:attr')",
        ),
        (
            f"{__name__}:NOT_A_SCORING",
            f"verifier.scoring: '{__name__}:NOT_A_SCORING' is a object; expected JudgeScoring",
        ),
        (
            "no_such_module_x:SCORING",
            "verifier.scoring: cannot import module 'no_such_module_x'",
        ),
    ],
)
def test_a_bad_scoring_is_one_line_when_the_config_is_read(scoring: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        VerifierConfig.model_validate({**RUBRIC, "scoring": scoring})
    assert str(info.value).startswith(expected)
    assert "\n" not in str(info.value)


def test_the_plug_in_surface_exports_the_scoring_contract() -> None:
    from emery import plugin

    assert (plugin.JudgeScoring, plugin.JudgeVerifier, plugin.JudgeReplyError) == (
        JudgeScoring,
        JudgeVerifier,
        JudgeReplyError,
    )

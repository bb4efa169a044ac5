"""The LLM-judge verifiers (rubric, contrastive) with a scripted judge: scores, feedback,
unreadable replies and config errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from emery.config import parse_config
from emery.config.resolve import resolve_verifier
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Dataset, Example
from emery.lm import FakeLM
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.verifiers.contrastive import ContrastiveJudge
from emery.verifiers.judge import JudgeReplyError, extract_json, read_score
from emery.verifiers.rubric import Criterion, RubricJudge
from emery.verifiers.text import ExactMatch

CRITERIA = [
    Criterion(name="correct", description="The total is right.", weight=3),
    Criterion(name="brief", description="One sentence.", weight=1),
]


def judge(*replies: str) -> FakeLM:
    return FakeLM(list(replies), model="fake/judge")


def rubric_reply(**scores: tuple[float, str]) -> str:
    body = {name: {"score": s, "reason": r} for name, (s, r) in scores.items()}
    return json.dumps({"criteria": body})


EXAMPLE = Example(id="e1", input={"question": "2 + 3?"}, expected="5")


async def test_rubric_score_is_the_weighted_mean_and_feedback_lists_weakest_first() -> None:
    lm = judge(rubric_reply(correct=(0.5, "The total is off by one."), brief=(1.0, "Short.")))
    verifier = RubricJudge(CRITERIA, judge=lm)
    verdict = await verifier.verify(EXAMPLE, "It is 6, I believe.")
    assert verdict.score == pytest.approx((3 * 0.5 + 1 * 1.0) / 4)
    assert verdict.feedback == (
        "Rubric score 0.62 (weighted mean of 2 criteria)."
        " correct 0.50 (weight 3): The total is off by one. brief 1.00: Short."
    )
    prompt = lm.calls[0][-1]["content"]
    assert "## Answer\nIt is 6, I believe." in prompt
    assert "## Reference answer\n5" in prompt
    assert "1. correct: The total is right." in prompt
    assert "2. brief: One sentence." in prompt
    assert "question: 2 + 3?" in prompt
    assert verifier.stats.calls == 1
    assert verifier.stats.unreadable == 0


async def test_example_meta_criteria_are_added_and_replace_by_name() -> None:
    example = Example(
        id="e2",
        input={"q": "x"},
        meta={"rubric": ["Mentions units", {"name": "Correct", "weight": 1}]},
    )
    reply = {
        "criteria": [
            {"name": "brief", "score": 1},
            {"name": "Correct", "score": 0, "reason": "wrong"},
            {"name": "mentions  units", "score": 1},
        ]
    }
    lm = judge("Sure:\n```json\n" + json.dumps(reply) + "\n```")
    verifier = RubricJudge(CRITERIA, judge=lm)
    names = [c.name for c in verifier.criteria_for(example)]
    assert names == ["brief", "Mentions units", "Correct"]
    verdict = await verifier.verify(example, "y")
    assert verdict.score == pytest.approx(2 / 3)  # correct now weighs 1, not 3
    assert "Correct 0.00: wrong." in verdict.feedback


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"correct": {"score": 7, "reason": "a"}, "brief": {"score": -2}}', 0.75),
        ('Here: {"criteria": {"1": 0.5, "2": "100%"}} and more {', (1.5 + 1) / 4),
        ('```\nnot json\n```\n{"criteria": {"CORRECT": {"score": "1"}, "brief": 0}}', 0.75),
    ],
)
async def test_rubric_reads_lenient_replies_and_clamps_scores(reply: str, score: float) -> None:
    verdict = await RubricJudge(CRITERIA, judge=judge(reply)).verify(EXAMPLE, "5")
    assert verdict.score == pytest.approx(score)


async def test_a_criterion_without_a_readable_score_scores_zero_and_says_so() -> None:
    verifier = RubricJudge(CRITERIA, judge=judge('{"criteria": {"correct": {"score": 1}}}'))
    verdict = await verifier.verify(EXAMPLE, "5")
    assert verdict.score == pytest.approx(0.75)
    assert "brief 0.00: the judge's score for this criterion could not be read" in verdict.feedback
    assert verifier.stats.unreadable == 0


@pytest.mark.parametrize(
    "reply",
    [
        "I think it is good.",
        '{"criteria": {"speed": {"score": 1}}}',
        '{"criteria": {"correct": {"score": "high"}, "brief": {"reason": "x"}}}',
        '["not", "criteria"]',
        '{"criteria": 3}',
    ],
)
async def test_an_unreadable_judge_reply_scores_zero_and_is_counted(reply: str) -> None:
    verifier = RubricJudge(CRITERIA, judge=judge(reply, reply))
    first = await verifier.verify(EXAMPLE, "5")
    await verifier.verify(EXAMPLE, "5")
    assert first.score == 0.0
    assert first.feedback.startswith("The judge's reply could not be read (")
    assert verifier.stats.unreadable == 2
    assert verifier.stats.calls == 2


async def test_contrastive_feedback_names_missing_and_wrong_facts() -> None:
    reply = json.dumps(
        {
            "missing": ["the capital is Canberra"],
            "wrong": ["the population", "none"],
            "score": 0.4,
            "reason": "Half of the facts are there.",
        }
    )
    lm = judge(reply)
    verifier = ContrastiveJudge(lm)
    example = Example(id="c", input={"q": "Australia?"}, expected="Canberra; 26 million")
    verdict = await verifier.verify(example, "Sydney; 20 million")
    assert verdict.score == pytest.approx(0.4)
    assert verdict.feedback == (
        "Judge score 0.40 against the gold output. Missing: the capital is Canberra."
        " Wrong: the population. Half of the facts are there."
    )
    prompt = lm.calls[0][-1]["content"]
    assert "## Reference answer\nCanberra; 26 million" in prompt
    assert "## Answer\nSydney; 20 million" in prompt


async def test_contrastive_agreement_and_unreadable_and_missing_gold() -> None:
    verifier = ContrastiveJudge(judge('{"score": 1.5, "missing": [], "wrong": []}', "{}"))
    good = await verifier.verify(EXAMPLE, "5")
    assert good.score == 1.0
    assert "No fact of the gold output is missing or wrong." in good.feedback
    bad = await verifier.verify(EXAMPLE, "5")
    assert bad.score == 0.0
    assert "no score" in bad.feedback
    assert verifier.stats.unreadable == 1
    no_gold = await verifier.verify(Example(id="n", input={"q": "?"}), "5")
    assert no_gold.score == 0.0
    assert "no gold output" in no_gold.feedback
    assert verifier.stats.calls == 2  # no judge call without a gold output
    assert verifier.needs_expected


async def test_a_judge_verifier_without_a_judge_model_says_so() -> None:
    with pytest.raises(ConfigError, match=r"no judge model \(set \[lm.judge\]\)"):
        await RubricJudge(CRITERIA).verify(EXAMPLE, "5")


def test_extract_json_and_read_score() -> None:
    assert extract_json('x ```json\n{"a": 1}\n``` y') == {"a": 1}
    assert extract_json('noise {bad} then {"b": [1, 2]} tail') == {"b": [1, 2]}
    with pytest.raises(JudgeReplyError, match="no JSON object"):
        extract_json("nothing here")
    assert read_score(" 0.3 ") == 0.3
    assert read_score(3) == 1.0
    assert read_score("-1") == 0.0
    for bad in (True, None, "n/a", float("nan"), [1]):
        with pytest.raises(JudgeReplyError):
            read_score(bad)


def config(verifier: dict[str, Any]) -> Any:
    return parse_config({"dataset": {"task": "word_problems"}, "verifier": verifier})


def test_config_builds_the_judge_kinds_and_the_gold_examples_alias() -> None:
    rubric = build_verifier(
        config(
            {"kind": "rubric", "criteria": [{"name": "correct", "description": "d", "weight": 2}]}
        ).verifier
    )
    assert isinstance(rubric, RubricJudge)
    assert rubric.criteria == [Criterion(name="correct", description="d", weight=2)]
    assert isinstance(build_verifier(VerifierConfig(kind="contrastive")), ContrastiveJudge)
    assert isinstance(build_verifier(VerifierConfig(kind="gold_examples")), ExactMatch)


@pytest.mark.parametrize(
    ("verifier", "message"),
    [
        (
            {"kind": "judge"},
            "config: verifier.kind: unknown kind 'judge'; known kinds: agreement, code_tests,"
            " contains,",
        ),
        (
            {"kind": "rubric", "criteria": [{"name": "a", "weight": -1}]},
            "config: verifier.criteria.0.weight: Input should be greater than or equal to 0",
        ),
        ({"kind": "rubric", "criteria": [{"name": "a", "wieght": 1}]}, "did you mean 'weight'"),
    ],
)
def test_config_errors_are_one_line(verifier: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        config(verifier)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def _dataset(*examples: Example, verifier: dict[str, Any] | None = None) -> Dataset:
    return Dataset(train=list(examples), verifier=verifier)


@pytest.mark.parametrize(
    ("verifier", "examples", "message"),
    [
        (
            {"kind": "rubric"},
            [Example(id="a", input={"q": 1})],
            "example a: the rubric verifier has no criteria; add [[verifier.criteria]]",
        ),
        (
            {"kind": "rubric", "criteria": [{"name": "a", "weight": 0}]},
            [],
            "verifier.criteria: the criteria's weights sum to 0",
        ),
        (
            {"kind": "rubric", "criteria": [{"name": "a"}, {"name": " A "}]},
            [],
            "verifier.criteria: criterion 'a' is given twice",
        ),
        (
            {"kind": "rubric"},
            [Example(id="b", input={"q": 1}, meta={"rubric": [{"name": "x", "weight": -2}]})],
            "example b: meta.rubric.0: weight: Input should be greater than or equal to 0",
        ),
        (
            {"kind": "rubric"},
            [Example(id="c", input={"q": 1}, meta={"rubric": "be nice"})],
            "example c: meta.rubric must be a list of criteria",
        ),
    ],
)
def test_rubric_problems_are_refused_before_any_model_call(
    verifier: dict[str, Any], examples: list[Example], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_verifier(config(verifier), _dataset(*examples))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_rubric_from_example_metadata_alone_or_from_the_dataset_is_accepted() -> None:
    example = Example(id="a", input={"q": 1}, meta={"rubric": ["Polite"]})
    verifier = resolve_verifier(config({"kind": "rubric"}), _dataset(example))
    assert isinstance(verifier, RubricJudge)
    assert [c.name for c in verifier.criteria_for(example)] == ["Polite"]
    suggested = _dataset(
        Example(id="b", input={"q": 1}),
        verifier={"kind": "rubric", "criteria": [{"name": "kind"}]},
    )
    no_section = parse_config({"dataset": {"task": "word_problems"}})
    assert isinstance(resolve_verifier(no_section, suggested), RubricJudge)
    broken = _dataset(verifier={"kind": "rubric", "criteria": [{"name": "k", "weight": -1}]})
    with pytest.raises(ConfigError, match=r"verifier.criteria.0.weight: Input should be greater"):
        resolve_verifier(no_section, broken)


def scripted_rubric_judge(scores: Sequence[float]) -> FakeLM:
    """Replies the given scores to criteria 1, 2, ... (used by the job tests too)."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        body = {str(i): {"score": s, "reason": f"r{i}"} for i, s in enumerate(scores, 1)}
        return json.dumps({"criteria": body})

    return FakeLM(reply, model="fake/judge")


async def test_criteria_may_be_answered_by_number() -> None:
    verdict = await RubricJudge(CRITERIA, judge=scripted_rubric_judge([0, 1])).verify(EXAMPLE, "5")
    assert verdict.score == pytest.approx(0.25)
    assert verdict.feedback.endswith("correct 0.00 (weight 3): r1. brief 1.00: r2.")

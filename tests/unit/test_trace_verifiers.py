"""Verifiers for unlabeled data from traces (pairwise preference against the recorded
reply, the feedback score) and the report's label count and judge–feedback agreement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_from_traces import chat_span

import emery
from emery.core.feedback import FeedbackRecord, NewFeedback
from emery.core.models import ChatMessage, Example
from emery.evaluation.label_agreement import label_agreement
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.systems.prompt_program import PromptProgram
from emery.systems.stages import PromptProgramConfig
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.verifiers.feedback_score import FeedbackScore
from emery.verifiers.preference import PreferenceJudge, output_first
from emery.verifiers.rubric import Criterion, RubricJudge
from emery.verifiers.text import ExactMatch

RUBRIC = [Criterion(name="helpful", description="The reply helps.")]


def labeled(example_id: str, reply: str, score: float | None) -> Example:
    meta: dict[str, Any] = {"trace_id": "t" * 32}
    if score is not None:
        meta["feedback"] = {"score": score, "kind": "score", "source": "trace"}
    return Example(id=example_id, input={"question": "q"}, expected=reply, meta=meta)


async def test_preference_scores_by_which_answer_the_judge_prefers() -> None:
    first = next(f"e{i}" for i in range(20) if output_first(Example(id=f"e{i}", input={})))
    second = next(f"e{i}" for i in range(20) if not output_first(Example(id=f"e{i}", input={})))
    for example_id, better, expected in [
        (first, "A", 1.0),
        (first, "B", 0.0),
        (second, "A", 0.0),
        (second, "B", 1.0),
        (first, "tie", 0.5),
    ]:
        judge = FakeLM([json.dumps({"better": better, "reason": "It is right"})])
        verifier = PreferenceJudge(judge)
        verdict = await verifier.verify(labeled(example_id, "old reply", None), "new answer")
        assert verdict.score == expected, (example_id, better)
        prompt = judge.calls[0][-1]["content"]
        a, b = ("new answer", "old reply") if example_id == first else ("old reply", "new answer")
        assert f"## Answer A\n{a}" in prompt
        assert f"## Answer B\n{b}" in prompt
    unreadable = PreferenceJudge(FakeLM(['{"better": "C"}']))
    verdict = await unreadable.verify(labeled(first, "old", None), "new")
    assert verdict.score == 0.0
    assert "could not be read" in verdict.feedback
    assert unreadable.stats.unreadable == 1


def test_the_feedback_score_carries_the_rating_by_similarity() -> None:
    verifier = FeedbackScore()
    good, bad = labeled("g", "paris is the capital", 1.0), labeled("b", "lyon is the capital", 0.0)
    assert verifier.check(good, "paris is the capital").score == 1.0
    assert verifier.check(good, "no idea").score == 0.5
    assert verifier.check(bad, "lyon is the capital").score == 0.0
    assert verifier.check(labeled("n", "x", None), "anything").score == 0.5
    assert verifier.check(labeled("h", "x y", 0.75), "x z").score == pytest.approx(0.625)


def test_a_reply_unlike_a_badly_rated_one_is_not_scored_as_right() -> None:
    # Thumbs down on a recorded label: a sentence the application cannot read, or another
    # label, is only "not that reply" (0.5), never as good as a thumbed-up reply repeated.
    verifier = FeedbackScore()
    bad = labeled("b", "pto_used", 0.0)
    different = verifier.check(bad, "The user is asking about their vacation days.")
    assert different.score == 0.5
    assert "not known to be right" in different.feedback
    good = labeled("g", "pto_request", 1.0)
    assert verifier.check(good, "pto_request").score > different.score


def test_the_new_kinds_build_from_config() -> None:
    preference = build_verifier(VerifierConfig(kind="preference", criteria="Be exact."))
    assert isinstance(preference, PreferenceJudge)
    assert preference.criteria == "Be exact."
    assert isinstance(build_verifier(VerifierConfig(kind="feedback")), FeedbackScore)


async def test_agreement_judges_the_recorded_replies_without_the_reference() -> None:
    def rate(messages: list[ChatMessage]) -> str:
        prompt = messages[-1]["content"]
        assert "Reference answer" not in prompt  # the reply is not compared with itself
        score = 0.9 if "## Answer\ngood" in prompt else 0.2
        return json.dumps({"criteria": {"helpful": {"score": score, "reason": "."}}})

    examples = [
        labeled("a", "good one", 1.0),
        labeled("b", "bad one", 0.0),
        labeled("c", "good two", 0.75),
        labeled("d", "bad two", None),
    ]
    found = await label_agreement(RubricJudge(RUBRIC, judge=FakeLM(rate)), examples)
    assert found is not None
    assert (found.examples, found.labeled, found.n) == (4, 3, 3)
    assert found.rho == pytest.approx(0.866, abs=1e-3)
    assert found.line() == (
        "labels: 3 of 4 examples have feedback (75%); judge vs feedback: Spearman rho +0.87 (n = 3)"
    )
    compared = await label_agreement(FeedbackScore(), examples)
    assert compared is not None
    assert compared.line().endswith("not measured (the verifier compares with the recorded reply)")
    plain = [Example(id="x", input={"q": 1}, expected="1")]
    assert await label_agreement(ExactMatch(), plain) is None  # not a dataset from traces


def test_a_job_on_traces_reports_labels_and_judge_agreement(tmp_path: Path) -> None:
    store = MemoryStore()
    replies = ["good reply", "bad reply"] * 5
    store.add_spans([chat_span(n, f"Question: q{n}", replies[n]) for n in range(10)])
    for n in range(6):  # feedback on six calls: up for the good replies, down for the bad
        thumb = "up" if replies[n].startswith("good") else "down"
        store.add_feedback(FeedbackRecord.of(NewFeedback(trace_id=f"{n:032x}", thumb=thumb)))
    built = emery.dataset_from_traces("Question: {question}", store=store)
    path = built.write(tmp_path / "traces.jsonl")

    def rate(messages: list[ChatMessage]) -> str:
        score = 1.0 if "## Answer\ngood" in messages[-1]["content"] else 0.0
        return json.dumps({"criteria": {"helpful": {"score": score, "reason": "."}}})

    program = PromptProgramConfig.model_validate(
        {
            "stages": [
                {
                    "name": "answer",
                    "instruction": "Answer.",
                    "messages": [{"role": "user", "template": "Question: {question}"}],
                }
            ]
        }
    )
    result = emery.optimize(
        PromptProgram(program),
        str(path),
        algorithm="baseline",
        budget={"metric_calls": 40},
        verifier=RubricJudge(RUBRIC, judge=FakeLM(rate, model="fake/judge")),
        lm=FakeLM([], default="good answer"),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
        progress=False,
    )
    assert result.labels is not None
    assert (result.labels.examples, result.labels.labeled, result.labels.n) == (10, 6, 6)
    assert result.labels.rho == pytest.approx(1.0)
    report = Path(result.files["report"]).read_text()
    line = "labels: 6 of 10 examples have feedback (60%); judge vs feedback: Spearman rho +1.00"
    assert f"{line} (n = 6)" in report
    assert emery.Job(store, result.job_id).result().labels == result.labels

"""The judge model in jobs: the ``judge`` role (cached, metered, defaulting to the task
model), ``emery eval`` with ``[lm.judge]``, the evaluation scope, and a GEPA job that only
reaches full score by reading the judge's feedback."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_gepa_support import KeywordSystem, keyword_example, keyword_reflection_lm

import emery
from emery.config import parse_config
from emery.config.evaluation_scope import evaluation_scope, verifier_identity
from emery.config.resolve import build_models, resolve_dataset, resolve_system, resolve_verifier
from emery.core.models import ChatMessage, Dataset, Example
from emery.jobs import create_job
from emery.jobs.evaluate import evaluate_config
from emery.lm import FakeLM
from emery.lm.cache import ResponseCache
from emery.store import MemoryStore
from emery.verifiers.judge import JUDGE_SYSTEM, with_judge
from emery.verifiers.rubric import Criterion, RubricJudge
from emery.workers.runner import build_job_work

RULES = {"name": "rules", "description": "Every component follows the rule it is given."}


def _section(prompt: str, title: str) -> str:
    return prompt.split(f"## {title}\n", 1)[1].split("\n\n", 1)[0].strip()


def grade_numbers(messages: Sequence[ChatMessage]) -> str:
    """A judge for word problems: 1 when the answer's number is the reference's."""
    prompt = messages[-1]["content"]
    got, gold = _section(prompt, "Answer"), _section(prompt, "Reference answer")
    right = got.strip('"') == gold.strip('"')
    reason = "The number matches." if right else f"The answer {got} is not {gold}."
    return json.dumps({"criteria": {"correct": {"score": int(right), "reason": reason}}})


JUDGE = FakeLM(grade_numbers, model="fake/number-judge")
"""Loaded by configs as ``python/test_judge_jobs:JUDGE``."""


def _config(tmp_path: Path, **lm: Any) -> dict[str, Any]:
    return {
        "dataset": {"task": "word_problems", "n_train": 0, "n_val": 0, "n_test": 6},
        "lm": {"task": {"model": "python/fake_models:word_problem_lm"}, **lm},
        "verifier": {"kind": "rubric", "criteria": [{"name": "correct"}]},
        "runtime": {"workdir": str(tmp_path / ".emery")},
    }


def test_the_judge_role_is_the_task_model_by_default_and_is_metered_and_cached(
    tmp_path: Path,
) -> None:
    config = parse_config(_config(tmp_path))
    assert config.lm.for_role("judge") == config.lm.task
    judged = parse_config(_config(tmp_path, judge={"model": "python/test_judge_jobs:JUDGE"}))
    assert judged.lm.for_role("judge").model == "python/test_judge_jobs:JUDGE"
    cache = ResponseCache(tmp_path / "cache.db")
    try:
        models = build_models(judged, roles=("task", "judge"), cache=cache)
        dataset = resolve_dataset(judged, tmp_path)
        verifier = with_judge(resolve_verifier(judged, dataset), models["judge"])
        assert isinstance(verifier, RubricJudge)
        assert verifier.judge is models["judge"]
        example = dataset.test[0]
        before = len(JUDGE.calls)
        first = asyncio.run(verifier.verify(example, example.expected))
        second = asyncio.run(verifier.verify(example, example.expected))
    finally:
        cache.close()
    assert first == second
    assert first.score == 1.0
    assert len(JUDGE.calls) == before + 1  # the second identical call is a cache hit
    usage = models.meter.by_role()
    assert set(usage) == {"judge"}
    assert usage["judge"].calls == 2
    assert usage["judge"].cache_hits == 1
    assert usage["judge"].prompt_tokens > 0


def test_emery_eval_scores_with_the_judge_and_reports_its_usage(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path, judge={"model": "python/test_judge_jobs:JUDGE"}))
    before = len(JUDGE.calls)
    report = asyncio.run(evaluate_config(config, base_dir=tmp_path))
    gold = [int(e.expected) for e in resolve_dataset(config, tmp_path).test]
    # the scripted task model is right exactly when the gold answer is even
    assert [r.score for r in report.results] == [float(g % 2 == 0) for g in gold]
    wrong = next(r for r in report.results if r.score == 0.0)
    assert wrong.feedback.startswith("Rubric score 0.00 (weighted mean of 1 criteria). correct")
    assert "is not" in wrong.feedback
    assert report.usage["judge"].calls == 6
    assert report.usage["judge"].cache_hits == 0
    assert report.usage["task"].calls == 6
    assert len(JUDGE.calls) == before + 6
    again = asyncio.run(evaluate_config(config, base_dir=tmp_path))
    assert again.usage["judge"].cache_hits == 6
    assert again.usage["judge"].prompt_tokens == 0
    assert len(JUDGE.calls) == before + 6


def test_the_evaluation_scope_follows_the_judge_model_only_for_judge_verifiers(
    tmp_path: Path,
) -> None:
    def scope(verifier: dict[str, Any], judge: str) -> str:
        data = _config(tmp_path, judge={"model": judge})
        data["verifier"] = verifier
        config = parse_config(data)
        dataset = resolve_dataset(config, tmp_path)
        return evaluation_scope(
            config, resolve_system(config), resolve_verifier(config, dataset), dataset=dataset
        )

    rubric = {"kind": "rubric", "criteria": [{"name": "correct"}]}
    assert scope(rubric, "openai/a") != scope(rubric, "openai/b")
    assert scope({"kind": "numeric"}, "openai/a") == scope({"kind": "numeric"}, "openai/b")


def keyword_judge(messages: Sequence[ChatMessage]) -> str:
    """Fails a run whose components did not all reply "ok" and says, per failed
    component, which word its text must mention (from the example's ``needs``)."""
    prompt = messages[-1]["content"]
    needs = json.loads(re.search(r"^needs: (.*)$", prompt, re.MULTILINE)[1])  # type: ignore[index]
    replies = json.loads(_section(prompt, "Answer"))
    bad = [name for name, reply in sorted(replies.items()) if reply != "ok"]
    reasons = [f"component {name} must mention {needs.get(name)!r}" for name in bad]
    verdict = {"score": 0 if bad else 1, "reason": "; ".join(reasons) or "All rules followed."}
    return json.dumps({"criteria": {"rules": verdict}})


def keyword_task_and_judge(examples: Sequence[Example]) -> FakeLM:
    """One model for two roles (no ``[lm.judge]``): it grades judge prompts with
    ``keyword_judge`` and otherwise answers as the keyword task model does."""
    by_id = {e.id: e for e in examples}

    def reply(messages: Sequence[ChatMessage]) -> str:
        if messages[0]["content"] == JUDGE_SYSTEM:
            return keyword_judge(messages)
        text = messages[0]["content"].lower()
        name, example_id = messages[-1]["content"].split("|")
        need = by_id[example_id].input["needs"].get(name)
        return "bad" if need and need not in text else "ok"

    return FakeLM(reply, model="fake/keywords-and-judge")


def test_a_gepa_job_reflects_on_the_judge_feedback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="emery.evaluation.evaluator")
    dataset = Dataset(
        name="keywords",
        # six of each kind: GEPA accepts a child only when the paired evidence on
        # train shows it better, which three examples cannot
        train=[
            example
            for copy in range(6)
            for example in (
                keyword_example(f"t1-{copy}", a="alpha"),
                keyword_example(f"t2-{copy}", b="beta"),
                keyword_example(f"t3-{copy}", a="alpha", b="beta"),
            )
        ],
        val=[keyword_example("v1", a="alpha"), keyword_example("v2", b="beta")],
        test=[keyword_example("s1", a="alpha", b="beta"), keyword_example("s2")],
    )
    reflection = keyword_reflection_lm()
    result = emery.optimize(
        KeywordSystem(),
        dataset,
        algorithm="gepa",
        budget=120,
        verifier={"kind": "rubric", "criteria": [RULES]},
        lm=keyword_task_and_judge(list(dataset)),
        reflection_lm=reflection,
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        progress=False,
    )
    assert result.state == "succeeded"
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    prompts = [call[0]["content"] for call in reflection.calls]
    assert any(
        "Feedback: Rubric score 0.00 (weighted mean of 1 criteria)."
        " rules 0.00: component a must mention 'alpha'." in prompt
        for prompt in prompts
    )
    assert result.usage["judge"].calls > 0
    assert result.usage["task"].calls > 0
    assert result.best_candidate is not None
    assert "alpha" in result.best_candidate.components["a"].lower()


def test_rubric_objects_passed_in_python_differ_in_scope_by_their_criteria() -> None:
    one = verifier_identity(RubricJudge([Criterion(name="a")]))
    two = verifier_identity(RubricJudge([Criterion(name="a", weight=2)]))
    assert one != two
    assert one["settings"]["criteria"] == [{"name": "a", "description": "", "weight": 1.0}]


def test_a_runner_rebuilds_the_judge_from_the_stored_config(tmp_path: Path) -> None:
    store = MemoryStore()
    data = _config(tmp_path, judge={"model": "python/test_judge_jobs:JUDGE"})
    job_id = create_job(store, parse_config(data), given=data, base_dir=tmp_path).id
    work = build_job_work(store, job_id, "worker-1", queued=False)
    try:
        verifier = work.evaluator.verifier
        assert isinstance(verifier, RubricJudge)
        assert verifier.judge is not None
        assert verifier.judge.model == "fake/number-judge"
        example = resolve_dataset(parse_config(data), tmp_path).test[0]
        verdict = asyncio.run(verifier.verify(example, example.expected))
        assert verdict.score == 1.0
    finally:
        work.close()

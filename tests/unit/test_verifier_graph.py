"""Verifier graphs (``graph_type = "verifier"``): a graph that scores traces, trained so its
scores agree with the dataset's gold scores.

The traces are answers to word problems, half right (gold score 1) and half off by three
(gold score 0). The scripted judge model calls every answer fine (score 1) unless its
instruction tells it to recompute the answer, so the seed agrees on half the traces. The
scripted reflection model proposes that instruction only when the feedback it is shown says
the judge was too lenient: GEPA must carry the agreement feedback to reflection and keep the
child that agrees more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import emery
from emery.config.resolve import JobInputs
from emery.core.errors import ConfigError, EmeryError
from emery.core.models import ChatMessage, Dataset, Example
from emery.data.tasks import builtin_task
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.verifiers.agreement import Agreement, reward_of, score_of

GOOD = "Recompute the answer yourself; score 1 only if the given answer matches yours."
VERIFIER: dict[str, Any] = {
    "kind": "graph",
    "name": "answer_judge",
    "graph_type": "verifier",
    "nodes": [
        {
            "name": "judge",
            "instruction": "Rate how good the answer is.",
            "messages": [{"template": "Question: {input}\nAnswer: {output}\n{transcript}"}],
            "parser": {"kind": "json"},
        },
        {"kind": "output", "name": "reward", "value": "judge"},
    ],
}

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def gold_answers() -> dict[str, int]:
    data = builtin_task("word_problems").dataset(seed=0, n_train=6, n_val=4, n_test=4)
    return {str(e.input["question"]): int(e.expected) for e in data}


def traces() -> Dataset:
    """Each problem's trace: the gold answer (gold score 1) or one off by 3 (score 0)."""
    data = builtin_task("word_problems").dataset(seed=0, n_train=6, n_val=4, n_test=4)

    def trace(example: Example, index: int) -> Example:
        right = index % 2 == 0
        answer = int(example.expected) + (0 if right else 3)
        return Example(
            id=example.id,
            input={
                "input": example.input["question"],
                "output": str(answer),
                "transcript": "The agent made one model call.",
            },
            expected=1.0 if right else 0.0,
        )

    splits = {s: [trace(e, i) for i, e in enumerate(data.split(s))] for s in ("train", "val")}
    return Dataset(
        name="answer_checks", **splits, test=[trace(e, i) for i, e in enumerate(data.test)]
    )


def judge_lm() -> FakeLM:
    gold = gold_answers()

    def reply(messages: Sequence[ChatMessage]) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        content = messages[-1]["content"]
        question = next(q for q in gold if q in content)
        found = re.search(r"Answer: (-?\d+)", content)
        assert found is not None
        if "recompute" not in system.lower():
            return json.dumps({"score": 1, "reason": "looks fine"})
        right = int(found.group(1)) == gold[question]
        reason = "matches" if right else f"the answer is {gold[question]}"
        return json.dumps({"score": 1 if right else 0, "reason": reason})

    return FakeLM(reply, model="fake/judge")


def proposer() -> FakeLM:
    def reply(messages: Sequence[ChatMessage]) -> str:
        lenient = "too lenient" in messages[-1]["content"]
        return f"```\n{GOOD if lenient else 'Rate the answer carefully.'}\n```"

    return FakeLM(reply, model="fake/proposer")


def test_gepa_raises_agreement_and_run_verifier_returns_the_reward(tmp_path: Path) -> None:
    store = MemoryStore()
    judge = judge_lm()
    result = emery.optimize(
        VERIFIER,
        traces(),
        algorithm="gepa",
        budget=120,
        lm=judge,
        reflection_lm=proposer(),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
        progress=False,
    )
    assert result.state == "succeeded"
    assert result.baseline_test is not None
    assert result.best_test is not None
    assert result.baseline_test.mean == 0.5
    assert result.best_test.mean == 1.0
    assert result.best_candidate is not None
    assert result.best_candidate.components["judge"] == GOOD

    job = emery.Job(store, result.job_id, inputs=JobInputs(lms={"task": judge}))
    question, answer = next(iter(gold_answers().items()))
    trace = {"input": question, "output": str(answer + 1), "transcript": "one call"}
    reward = job.run_verifier(trace)
    assert (reward.score, reward.feedback) == (0.0, f"the answer is {answer}")
    assert job.run_verifier({**trace, "output": str(answer)}).score == 1.0


def test_a_verifier_graph_is_scored_by_agreement_only(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"verifier\.kind must be 'agreement' or unset"):
        emery.optimize(
            VERIFIER,
            traces(),
            algorithm="baseline",
            verifier="exact",
            lm=judge_lm(),
            runtime={"workdir": str(tmp_path / ".emery")},
            store=MemoryStore(),
            progress=False,
        )


def test_run_verifier_on_a_policy_graph_is_an_error(tmp_path: Path) -> None:
    store = MemoryStore()
    policy = json.loads(json.dumps(VERIFIER))
    del policy["graph_type"]
    result = emery.optimize(
        policy,
        traces(),
        algorithm="baseline",
        verifier="exact",
        lm=judge_lm(),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
        progress=False,
    )
    job = emery.Job(store, result.job_id, inputs=JobInputs(lms={"task": judge_lm()}))
    with pytest.raises(EmeryError, match="trains a policy graph, not a verifier graph"):
        job.run_verifier({"input": "q", "output": "1", "transcript": ""})


def test_agreement_reads_scores_and_says_which_way_it_was_off() -> None:
    assert [score_of(v) for v in (0.25, "0.5", '{"score": 1}', {"reward": 0}, "Score: 0.75")] == [
        0.25,
        0.5,
        1.0,
        0.0,
        0.75,
    ]
    for bad in ("none", 7, {"grade": 1}, True):
        with pytest.raises(ValueError, match="score"):
            score_of(bad)
    example = Example(id="e", input={}, expected=0.25)
    lenient = Agreement().check(example, {"score": 1})
    assert (lenient.score, "too lenient by 0.75" in lenient.feedback) == (0.25, True)
    harsh = Agreement().check(example, "0")
    assert (harsh.score, "too harsh by 0.25" in harsh.feedback) == (0.75, True)
    assert Agreement().check(example, "no idea").score == 0.0
    assert reward_of('{"score": 0.5, "reason": "half"}').feedback == "half"

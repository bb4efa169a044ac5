"""Rank agreement (``[verifier] agreement = "rank"``): a verifier graph scored by Spearman's
rho between its scores and the gold scores over each evaluated batch.

The training task: traces are answers to word problems, alternately right (gold 1) and off
by three (gold 0). The scripted judge says 1 to every answer until its instruction tells
it to recompute the answer; then it says 0.3 for a right answer and 0.1 for a wrong one.
That judge orders the traces perfectly (rank agreement 1) while its scores stay far from
the gold ones (mean absolute agreement 0.6), so a best score of 1 is the rank metric's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lift_support import assert_test_lift
from test_verifier_graph import VERIFIER as JUDGE_GRAPH

import emery
from emery.config import parse_config
from emery.config.evaluation_scope import evaluation_scope
from emery.config.resolve import resolve_dataset, resolve_system, resolve_verifier
from emery.core.example_result import ExampleResult
from emery.core.models import ChatMessage, Dataset, Example
from emery.data.tasks import builtin_task
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.rank import average_ranks, rank_agreement, rank_interval, spearman
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.verifiers.agreement import Agreement, RankAgreement
from emery.verifiers.config import VerifierConfig, build_verifier

GOOD = "Recompute the answer yourself; score it by whether it matches yours."
VERIFIER: dict[str, Any] = {**JUDGE_GRAPH, "name": "answer_ranker"}

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def test_spearman_is_one_for_a_monotone_scorer_and_minus_one_reversed() -> None:
    gold = [0.0, 0.2, 0.5, 0.9, 1.0]
    assert spearman([x**3 / 2 for x in gold], gold) == pytest.approx(1.0)
    assert spearman([1 - x for x in gold], gold) == pytest.approx(-1.0)
    assert rank_agreement([(x / 10, x) for x in gold]) == pytest.approx(1.0)
    assert rank_agreement([(1 - x, x) for x in gold]) == pytest.approx(0.0)


def test_ties_take_average_ranks() -> None:
    assert average_ranks([0.5, 0.1, 0.5, 0.9]) == [2.5, 1.0, 2.5, 4.0]
    # Pearson of ranks [1.5, 1.5, 3, 4] and [1, 2, 3, 4]: 0.5 * 5 / sqrt(4.5 * 5)
    rho = spearman([0.1, 0.1, 0.4, 0.8], [0.0, 0.1, 0.5, 1.0])
    assert rho == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert spearman([0.2, 0.2, 0.9], [0.0, 0.0, 1.0]) == pytest.approx(1.0)


def test_constant_or_missing_scores_are_defined() -> None:
    assert spearman([0.5, 0.5, 0.5], [0.0, 0.5, 1.0]) is None
    assert spearman([0.1, 0.7], [1.0, 1.0]) is None
    assert spearman([0.3], [0.3]) is None
    assert rank_agreement([(0.5, 0.0), (0.5, 0.5), (0.5, 1.0)]) == 0.5  # constant: chance
    assert rank_agreement([(0.1, 0.0), (0.9, 1.0), None, None]) == 0.5  # half unreadable
    assert rank_agreement([]) == rank_agreement([None, None]) == 0.0
    assert rank_interval([(0.1, 0.0), (0.9, 1.0)]) == (0.0, 1.0)
    low, high = rank_interval([(x / 20, x / 10) for x in range(10)])
    assert 0.0 < low < high == pytest.approx(1.0)


def test_a_rank_batch_is_scored_as_a_whole() -> None:
    def result(example: str, pair: tuple[float, float] | None, score: float) -> ExampleResult:
        return ExampleResult(candidate_id="c", example_id=example, score=score, ranked=pair)

    ranked = EvalResult(
        candidate_id="c",
        results=[result("a", (0.3, 1.0), 0.3), result("b", (0.1, 0.0), 0.9)],
    )
    assert (ranked.ranked, ranked.mean, ranked.total) == (True, 1.0, 2.0)
    assert ranked.summary().mean == 1.0
    plain = EvalResult(candidate_id="c", results=[result("a", None, 0.3), result("b", None, 0.9)])
    assert (plain.mean, plain.total) == (pytest.approx(0.6), pytest.approx(1.2))


def test_the_rank_verifier_keeps_the_per_example_agreement_and_adds_the_pair() -> None:
    verifier = build_verifier(VerifierConfig(kind="agreement", agreement="rank"))
    assert isinstance(verifier, RankAgreement)
    assert type(build_verifier(VerifierConfig(kind="agreement"))) is Agreement
    example = Example(id="e", input={}, expected=0.25)
    verdict = verifier.check(example, {"score": 1})
    assert (verdict.score, verdict.ranked, "too lenient" in verdict.feedback) == (
        0.25,
        (1.0, 0.25),
        True,
    )
    assert verifier.check(example, "no idea").ranked is None


def test_only_the_rank_metric_changes_the_evaluation_scope() -> None:
    def scope(verifier: dict[str, Any]) -> str:
        config = parse_config({"dataset": {"task": "word_problems"}, "verifier": verifier})
        dataset = resolve_dataset(config)
        verifying = resolve_verifier(config, dataset)
        return evaluation_scope(config, resolve_system(config), verifying, dataset=dataset)

    default = scope({"kind": "agreement"})
    assert default == scope({"kind": "agreement", "agreement": "mae"})
    assert default != scope({"kind": "agreement", "agreement": "rank"})


def traces() -> Dataset:
    data = builtin_task("word_problems").dataset(seed=0, n_train=6, n_val=4, n_test=4)

    def trace(example: Example, index: int) -> Example:
        right = index % 2 == 0
        answer = int(example.expected) + (0 if right else 3)
        inputs = {"input": example.input["question"], "output": str(answer), "transcript": ""}
        return Example(id=example.id, input=inputs, expected=1.0 if right else 0.0)

    splits = {s: [trace(e, i) for i, e in enumerate(data.split(s))] for s in ("train", "val")}
    test = [trace(e, i) for i, e in enumerate(data.test)]
    return Dataset(name="answer_ranks", **splits, test=test)


def judge_lm() -> FakeLM:
    data = builtin_task("word_problems").dataset(seed=0, n_train=6, n_val=4, n_test=4)
    gold = {str(e.input["question"]): int(e.expected) for e in data}

    def reply(messages: Sequence[ChatMessage]) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        content = messages[-1]["content"]
        if "recompute" not in system.lower():
            return json.dumps({"score": 1, "reason": "looks fine"})
        question = next(q for q in gold if q in content)
        found = re.search(r"Answer: (-?\d+)", content)
        assert found is not None
        return json.dumps({"score": 0.3 if int(found.group(1)) == gold[question] else 0.1})

    return FakeLM(reply, model="fake/judge")


def proposer() -> FakeLM:
    def reply(messages: Sequence[ChatMessage]) -> str:
        lenient = "too lenient" in messages[-1]["content"]
        return f"```\n{GOOD if lenient else 'Rate the answer carefully.'}\n```"

    return FakeLM(reply, model="fake/proposer")


@pytest.mark.parametrize("acceptance", ["evidence", "two_stage"])
def test_gepa_raises_rank_agreement(tmp_path: Path, acceptance: str) -> None:
    # A rank is scored over the whole batch: no per-example pairs can show the winner
    # better than the seed, so under two_stage too the best mean val wins.
    result = emery.optimize(
        VERIFIER,
        traces(),
        algorithm="gepa",
        settings={"acceptance": acceptance},
        budget=120,
        verifier={"kind": "agreement", "agreement": "rank"},
        lm=judge_lm(),
        reflection_lm=proposer(),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        progress=False,
    )
    # a constant scorer ranks like chance (0.5); mean absolute agreement would score 0.6
    best = assert_test_lift(result, 0.5, 1.0)
    assert best.components["judge"] == GOOD

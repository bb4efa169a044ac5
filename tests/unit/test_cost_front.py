"""Objectives beyond the score: costs per example on val, the Pareto front over the job's
``objectives`` and the winner its ``select`` rule picks (issue 33, item 2)."""

from __future__ import annotations

from pathlib import Path

import jobs_support as js
import pytest
from cost_front_support import LONG, SHORT, TINY, ids_by_text, run_fixed_job

from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.core.results import ExampleResult, RoleUsage, TokenUsage
from emery.evaluation.front import choose
from emery.evaluation.objectives import (
    OBJECTIVES,
    CandidateCost,
    Scored,
    cost_per_example,
    pareto_front,
)
from emery.evaluation.selection import CheapestWithin, WithinBudget, parse_select
from emery.reports import JobResult
from emery.reports.report import render_report

# --- costs and the front ----------------------------------------------------------------


def result(score: float, *, tokens: int = 0, calls: int = 1, seconds: float = 0.0) -> ExampleResult:
    return ExampleResult(
        candidate_id="c",
        example_id="e",
        score=score,
        usage=TokenUsage(prompt_tokens=tokens),
        lm_calls=calls,
        latency_s=seconds,
    )


def scored(name: str, scores: tuple[float, ...], tokens: float) -> Scored:
    mean = sum(scores) / len(scores)
    return Scored(name, scores, mean, CandidateCost(n=len(scores), tokens_by_role={"task": tokens}))


def test_cost_per_example_counts_every_role_a_run_reports() -> None:
    judged = result(1.0, tokens=99, calls=2, seconds=1.0).model_copy(
        update={
            "lm_usage": {
                "task": RoleUsage(calls=1, prompt_tokens=30, completion_tokens=10, cost_usd=0.2),
                "judge": RoleUsage(calls=1, prompt_tokens=50, completion_tokens=10),
            }
        }
    )
    plain = result(0.0, tokens=20, calls=1, seconds=3.0)  # no usage by role: its task tokens

    cost = cost_per_example([judged, plain])

    assert cost.tokens_by_role == {"judge": 30.0, "task": 30.0}
    assert (cost.tokens, cost.lm_calls, cost.latency_s, cost.cost_usd) == (60.0, 1.5, 2.0, 0.1)


def test_the_front_compares_scores_per_example_and_costs_by_their_means() -> None:
    wide = scored("wide", (1.0, 1.0, 0.0), tokens=100)
    narrow = scored("narrow", (0.0, 0.0, 1.0), tokens=100)  # lower mean, best on example 3
    padded = scored("padded", (1.0, 1.0, 0.0), tokens=150)  # wide's scores, dearer
    cheap = scored("cheap", (0.0, 0.0, 0.0), tokens=10)
    twin = scored("twin", (0.0, 0.0, 0.0), tokens=10)
    pool = [wide, narrow, padded, cheap, twin]

    by_score = pareto_front(pool, [OBJECTIVES["score"]])
    by_score_and_tokens = pareto_front(pool, [OBJECTIVES["score"], OBJECTIVES["tokens"]])

    assert [s.candidate_id for s in by_score] == ["wide", "narrow"]
    assert [s.candidate_id for s in by_score_and_tokens] == ["wide", "narrow", "cheap"]


def test_cheapest_within_picks_the_cheapest_near_the_best_score() -> None:
    best = scored("best", (1.0, 1.0, 1.0, 1.0), tokens=400)
    near = scored("near", (1.0, 1.0, 1.0, 0.0), tokens=250)  # 0.25 below
    far = scored("far", (1.0, 0.0, 0.0, 0.0), tokens=50)
    pool = [best, near, far]

    assert parse_select("cheapest_within:0.25", ["score", "tokens"]).choose(pool, best) is near
    assert parse_select("cheapest_within:0.2", ["score", "tokens"]).choose(pool, best) is best
    assert parse_select("best_score").choose(pool, best) is best


def test_a_budget_per_example_picks_the_best_score_that_fits() -> None:
    best = scored("best", (1.0, 1.0), tokens=400)
    fits = scored("fits", (1.0, 0.0), tokens=300)
    cheaper = scored("cheaper", (0.0, 0.0), tokens=100)
    pool = [best, fits, cheaper]

    assert parse_select("budget:tokens=300").choose(pool, best) is fits
    assert parse_select("budget:tokens=5").choose(pool, best) is best  # none fits


def test_select_values_parse_into_rules() -> None:
    assert parse_select("cheapest_within:0.02", ["score", "latency_s", "tokens"]) == (
        CheapestWithin(0.02, "latency_s", "cheapest_within:0.02")
    )
    assert parse_select("budget:tokens=500,lm_calls=2") == WithinBudget(
        {"tokens": 500.0, "lm_calls": 2.0}, "budget:tokens=500,lm_calls=2"
    )


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"objectives": ["score", "tokenz"]}, r"job.objectives: unknown objective 'tokenz'"),
        ({"objectives": ["tokens"]}, r"job.objectives: the objectives must include \"score\""),
        ({"select": "cheapest"}, r"job.select: unknown rule 'cheapest'; use \"best_score\""),
        ({"select": "cheapest_within:0.02"}, r"job.select: 'cheapest_within:0.02' needs a cost"),
        (
            {"objectives": ["score", "tokens"], "select": "cheapest_within:two"},
            r"job.select: 'cheapest_within:two': expected a score margin",
        ),
        (
            {"objectives": ["score", "tokens"], "select": "cheapest_within:nan"},
            r"job.select: 'cheapest_within:nan': a score margin such as 0.02 must be a finite",
        ),
        ({"select": "budget:dollars=1"}, r"job.select: 'budget:dollars=1': write budget:"),
        ({"select": "budget:tokens=-1"}, r"job.select: 'budget:tokens=-1': a limit cannot be"),
    ],
)
def test_bad_objectives_and_rules_are_one_line_config_errors(
    tmp_path: Path, job: dict[str, object], message: str
) -> None:
    given = js.search_config(tmp_path)
    given["job"] = {**given["job"], **job}  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=message) as caught:
        parse_config(given)
    assert "\n" not in str(caught.value)


# --- a job whose cheaper winner is chosen ------------------------------------------------


def test_a_cost_front_whose_cheaper_winner_is_chosen(tmp_path: Path) -> None:
    store, job_id, result = run_fixed_job(
        tmp_path, objectives=["score", "tokens"], select="cheapest_within:0.02"
    )
    ids = ids_by_text(store, job_id)

    front = result.front
    assert front is not None
    assert (front.winner_id, front.best_score_id) == (ids[SHORT], ids[LONG])
    assert {m.candidate_id for m in front.front} == {ids[SHORT], ids[TINY]}  # LONG: dearer
    short, long = front.member(ids[SHORT]), front.member(ids[LONG])
    assert short is not None
    assert long is not None
    assert short.score == long.score == 1.0
    assert short.cost.tokens < long.cost.tokens
    assert result.best_candidate is not None
    assert result.best_candidate.id == ids[SHORT]
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    assert store.get_job(job_id).best_candidate_id == ids[SHORT]
    report = render_report(result)
    assert "Front over score, tokens on val" in report
    assert f"select cheapest_within:0.02 over score, tokens chose {ids[SHORT][:12]}" in report
    # rebuilt from the store (emery report), the front and its winner stay
    assert JobResult.model_validate(store.get_job(job_id).result).front == front


def test_the_defaults_keep_the_searchs_best_and_record_no_front(tmp_path: Path) -> None:
    store, job_id, result = run_fixed_job(tmp_path)

    assert result.front is None
    assert store.get_job(job_id).best_candidate_id == ids_by_text(store, job_id)[LONG]
    assert "Front over" not in render_report(result)


def test_best_score_with_a_cost_objective_records_the_front_and_keeps_the_best(
    tmp_path: Path,
) -> None:
    store, job_id, result = run_fixed_job(tmp_path, objectives=["score", "tokens", "lm_calls"])

    assert result.front is not None
    assert result.front.winner_id == ids_by_text(store, job_id)[LONG]
    assert result.front.objectives == ["score", "tokens", "lm_calls"]
    assert len(result.front.candidates) == 4  # the seed and the three children


def test_choose_keeps_every_candidate_with_its_cost() -> None:
    best = scored("best", (1.0,), tokens=40)
    cheap = scored("cheap", (1.0,), tokens=10)

    front = choose([best, cheap], best, ["score", "tokens"], parse_select("best_score"))

    assert [(m.candidate_id, m.on_front) for m in front.candidates] == [
        ("best", False),
        ("cheap", True),
    ]
    assert front.winner_id == "best"

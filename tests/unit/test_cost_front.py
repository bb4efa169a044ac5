"""Objectives beyond the score: costs per example on val, the Pareto front over the job's
``objectives`` and the winner its ``select`` rule picks (issue 33, item 2)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import jobs_support as js
import pytest
import test_gepa_support as gepa
from cost_front_support import LONG, SHORT, TINY, TOLD, ids_by_text, run_fixed_job

from emery.algorithms.cost_acceptance import as_good_and_cheaper
from emery.algorithms.evidence import Evidence, paired
from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.core.example_result import ExampleResult, RoleUsage, TokenUsage
from emery.core.hashing import content_hash
from emery.core.models import ChatMessage, Dataset, Example, Lineage
from emery.core.plan_events import SelectPlanned
from emery.evaluation import EvalResult, Evaluator
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.front import choose
from emery.evaluation.objectives import (
    OBJECTIVES,
    CandidateCost,
    Scored,
    cost_per_example,
    pareto_front,
)
from emery.evaluation.selection import CheapestWithin, WithinBudget, parse_select
from emery.jobs.winner import val_pool
from emery.lm import CachedLM, FakeLM, ResponseCache
from emery.lm.usage import MeteredLM, UsageMeter
from emery.reports import JobResult
from emery.reports.event_text import describe_event
from emery.reports.html_report import gather, render_html
from emery.reports.report import render_report
from emery.systems import MessageTemplate, PromptProgram, PromptProgramConfig, StageConfig
from emery.verifiers import ExactMatch

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
    judged = result(1.0, tokens=40, calls=2, seconds=1.0).model_copy(
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


async def test_a_run_the_lm_cache_answered_costs_what_its_calls_did() -> None:
    cache = ResponseCache(":memory:")
    evaluator = Evaluator(
        PromptProgram(
            PromptProgramConfig(
                stages=[
                    StageConfig(
                        name="echo",
                        instruction="Repeat the word.",
                        messages=[MessageTemplate(template="{word}")],
                    )
                ]
            )
        ),
        ExactMatch(),
        MeteredLM(CachedLM(FakeLM(lambda _: "w0 w0 w0"), cache), UsageMeter(), "task"),
    )
    seed = evaluator.system.seed_candidate()
    examples = [Example(id="a", input={"word": "w0"}, expected="w0")]

    first = await evaluator.evaluate(seed, examples, "val")
    again = await evaluator.evaluate(seed, examples, "val")  # answered by the cache
    cache.close()

    assert again.results[0].lm_usage["task"].cache_hits == 1
    assert cost_per_example(again.results).tokens == cost_per_example(first.results).tokens == 7


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
    # the search was told what the job weighs (MIPRO's study aims for the rule)
    assert TOLD[-1] == (("score", "tokens"), "cheapest_within:0.02")

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
    html = render_html(gather(store, store.get_job(job_id), result))
    assert "<h2>Front over score, tokens on val</h2>" in html
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


def test_a_cost_rule_records_what_val_separates_before_the_search(tmp_path: Path) -> None:
    store, job_id, _ = run_fixed_job(
        tmp_path, objectives=["score", "tokens"], select="cheapest_within:0.02"
    )
    kinds = [event.kind for event in store.list_events(job_id)]
    assert kinds.index("select_planned") == kinds.index("budget_planned") + 1
    [event] = store.list_events(job_id, kinds=["select_planned"])
    planned = event.payload()
    assert isinstance(planned, SelectPlanned)
    n_val = store.get_job(job_id).config["dataset"]["n_val"]
    assert (planned.separation.examples, planned.margin) == (n_val, 0.02)
    text = describe_event(event)
    assert text.startswith(
        f"select cheapest_within:0.02 decides on val, candidates judged on {n_val} examples"
    )
    assert "its 2-point margin is finer: a candidate within it is one val cannot tell" in text

    # a budget rule has no margin; the default rule (whatever the objectives) no line
    store, job_id, _ = run_fixed_job(
        tmp_path, objectives=["score", "tokens"], select="budget:tokens=1000"
    )
    [event] = store.list_events(job_id, kinds=["select_planned"])
    assert "margin" not in describe_event(event)
    store, job_id, _ = run_fixed_job(tmp_path, objectives=["score", "tokens"])
    assert not store.list_events(job_id, kinds=["select_planned"])


def test_choose_keeps_every_candidate_with_its_cost() -> None:
    best = scored("best", (1.0,), tokens=40)
    cheap = scored("cheap", (1.0,), tokens=10)

    front = choose([best, cheap], best, ["score", "tokens"], parse_select("best_score"))

    assert [(m.candidate_id, m.on_front) for m in front.candidates] == [
        ("best", False),
        ("cheap", True),
    ]
    assert front.winner_id == "best"


# --- GEPA keeps an as-good, cheaper child when the job names a cost ----------------------


def _same_answers_lm(dataset: Dataset) -> FakeLM:
    """Right on half the questions whatever the instruction says: every child ties."""
    gold = {str(e.input["question"]): int(e.expected) for e in dataset}

    def reply(messages: Sequence[ChatMessage]) -> str:
        question = next(q for q in gold if q in messages[-1]["content"])
        wrong = int(content_hash([question])[:2], 16) % 2
        return f"Working.\nAnswer: {gold[question] + wrong}"

    return FakeLM(reply, model="fake/task")


def _shorter_lm() -> FakeLM:
    """A reflection that drops the instruction's first word."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        current = re.findall(r"```[a-z]*\n?(.*?)```", messages[0]["content"], re.DOTALL)[0]
        return "```\n" + " ".join(current.split()[1:] or ["Answer."]) + "\n```"

    return FakeLM(reply, model="fake/reflection")


@pytest.mark.parametrize(("objectives", "kept"), [(("score",), False), (("score", "tokens"), True)])
async def test_gepa_keeps_an_as_good_cheaper_child_only_when_a_cost_is_named(
    objectives: tuple[str, ...], kept: bool
) -> None:
    dataset = gepa.word_problems(n_train=12, n_val=4, n_test=0)
    ctx = gepa.word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=40),
        task=_same_answers_lm(dataset),
        reflection=_shorter_lm(),
    )
    ctx.seed_candidate = ctx.seed_candidate.derive(
        components={"solve": "Please read each word of the question slowly, then answer it."},
        lineage=Lineage(),
    )
    ctx.objectives = objectives

    outcome, _ = await gepa.run_gepa(ctx)

    pool = val_pool(ctx)
    assert (len(pool) > 1) is kept
    if kept:
        seed, child = pool[0], pool[1]
        assert child.mean == seed.mean
        assert child.cost.tokens < seed.cost.tokens
    assert outcome.state.best_candidate_id == outcome.state.seed_candidate_id


def _batch(scores: list[float], tokens: int) -> EvalResult:
    return EvalResult(candidate_id="c", results=[result(score, tokens=tokens) for score in scores])


def test_as_good_and_cheaper_needs_a_named_cost_and_no_loss() -> None:
    parent = _batch([1.0, 0.0, 1.0], tokens=50)
    tie_cheaper = _batch([1.0, 0.0, 1.0], tokens=40)
    behind_cheaper = _batch([1.0, 0.0, 0.0], tokens=10)
    tie_dearer = _batch([1.0, 0.0, 1.0], tokens=60)

    def judged(child: EvalResult) -> Evidence:
        return paired(child.scores, parent.scores)

    costs = ["score", "tokens"]
    assert as_good_and_cheaper(costs, parent, tie_cheaper, judged(tie_cheaper))
    assert not as_good_and_cheaper(["score"], parent, tie_cheaper, judged(tie_cheaper))
    assert not as_good_and_cheaper(costs, parent, behind_cheaper, judged(behind_cheaper))
    assert not as_good_and_cheaper(costs, parent, tie_dearer, judged(tie_dearer))
    assert as_good_and_cheaper(costs, parent, tie_cheaper, None)  # no pairs: the totals

"""LM token budgets over every role, honoured mid-step, in GEPA, APO, MIPRO and graph GEPA.

Each test runs an algorithm once without a token limit, logging every model call in
order (role, tokens) and where each committed step ended; then picks a call of a search
role (reflection, proposer, judge) in the middle of a step and runs again with
``lm_tokens`` equal to the tokens of every call up to and including it. The second run
must make exactly those calls and no more: the step stops at the limit, not at its end,
the search roles' tokens count, the cut step is not committed and the stop reason names
the limit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_graph_gepa import GRAPH

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.base import AlgorithmState, SearchContext
from emery.algorithms.context import build_search_context
from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Dataset, Example
from emery.evaluation.budget import BudgetConfig, BudgetExhausted
from emery.evaluation.service import eval_key
from emery.lm.base import LM, Completion
from emery.lm.cache import CachedLM, ResponseCache
from emery.lm.usage import MeteredLM, Price, RoleUsage, UsageMeter
from emery.lm.wrapper import LMWrapper
from emery.reports.event_text import describe_event
from emery.reports.html_report import ReportData, render_html
from emery.reports.job_result import JobResult
from emery.reports.report import render_report
from emery.systems.base import System
from emery.verifiers.base import Verdict, Verifier

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


@dataclass
class CallLog:
    """Every model call in order, and the number of calls made when each step committed."""

    calls: list[tuple[str, int]] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)


class Logged(LMWrapper):
    def __init__(self, inner: LM, role: str, log: CallLog) -> None:
        super().__init__(inner)
        self.role, self.log = role, log

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        completion = await self.inner.complete(messages, **params)
        self.log.calls.append((self.role, completion.usage.total_tokens))
        return completion


class Judged:
    """``inner``'s verdict after one call of the judge model (a judge role inside rollouts)."""

    def __init__(self, inner: Verifier, judge: LM) -> None:
        self.inner, self.judge = inner, judge

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        question = f"Is {output!r} right for {example.id}?"
        await self.judge.complete([{"role": "user", "content": question}])
        return await self.inner.verify(example, output, trace)


@dataclass
class Setup:
    """How to build one algorithm's search: its system, data, verifier, models by role."""

    algorithm: str
    settings: dict[str, Any]
    system: Callable[[], System]
    dataset: Dataset
    verifier: Verifier
    models: Callable[[], dict[str, LM]]
    budget: dict[str, Any] = field(default_factory=dict)
    price: Price | None = None


def context(
    setup: Setup,
    log: CallLog,
    meter: UsageMeter,
    budget: BudgetConfig,
    cache: ResponseCache | None = None,
    resume: Sequence[StepRecord] = (),
) -> SearchContext:
    """The search context of ``setup``, continuing from the committed steps ``resume`` as
    the engine does (their results known, their spending and candidates restored)."""
    lms: dict[str, LM] = {}
    for role, lm in setup.models().items():
        logged: LM = Logged(lm, role, log)
        inner = logged if cache is None else CachedLM(logged, cache)
        lms[role] = MeteredLM(inner, meter, role, price=setup.price)
    verifier: Verifier = setup.verifier
    if "judge" in lms:
        verifier = Judged(verifier, lms.pop("judge"))
    ctx = build_search_context(
        system=setup.system(),
        dataset=setup.dataset,
        verifier=verifier,
        lms=lms,
        budget=budget,
        meter=meter,
        concurrency=1,
        known={
            eval_key(r.candidate_id, r.example_id, r.split): r
            for record in resume
            for r in record.results
        },
        budget_usage=resume[-1].budget.model_copy(deep=True) if resume else None,
    )
    for record in resume:
        ctx.candidates.update((c.id, c) for c in record.candidates)
    return ctx


async def run(
    setup: Setup,
    lm_tokens: int | None = None,
    cache: ResponseCache | None = None,
    records: list[StepRecord] | None = None,
) -> tuple[CallLog, UsageMeter, list[StepRecord], str]:
    log, meter = CallLog(), UsageMeter()
    budget = BudgetConfig.model_validate({**setup.budget, "lm_tokens": lm_tokens})
    ctx = context(setup, log, meter, budget, cache)
    records = [] if records is None else records

    async def keep(record: StepRecord) -> None:
        records.append(record)
        log.commits.append(len(log.calls))

    algorithm = build_algorithm(setup.algorithm, setup.settings)
    outcome = await run_search(algorithm, ctx, on_step=keep)
    return log, meter, records, outcome.reason


def mid_step_call(log: CallLog, *roles: str, step: int = 1) -> int:
    """The index of the first call of one of ``roles`` in step ``step`` or later (the start
    is step 0) with more calls after it in its step."""
    for start, end in list(zip(log.commits, log.commits[1:], strict=False))[step - 1 :]:
        for index in range(start, end - 1):
            if log.calls[index][0] in roles:
                return index
    raise AssertionError(f"no {roles} call in the middle of a step: {log.calls}")


async def limit_at(setup: Setup, role: str) -> tuple[int, int, CallLog, list[StepRecord]]:
    """(the index of a ``role`` call mid-step, the token limit it reaches, the unlimited
    run's calls and records)."""
    reference, _, records, _ = await run(setup)
    cut = mid_step_call(reference, role)
    return cut, sum(tokens for _, tokens in reference.calls[: cut + 1]), reference, records


async def check_cut_at(setup: Setup, role: str) -> None:
    cut, limit, reference, reference_records = await limit_at(setup, role)
    step = next(i for i, made in enumerate(reference.commits) if made > cut)

    log, meter, records, reason = await run(setup, lm_tokens=limit)

    assert log.calls == reference.calls[: cut + 1]  # not one call after the limit
    assert reference.commits[step] > cut + 1  # the step had more calls to make
    assert meter.total().total_tokens == limit
    assert reason == f"lm_tokens: {limit} of {limit} used"
    assert len(records) == step  # the cut step is not committed
    assert [r.state for r in records] == [r.state for r in reference_records[:step]]
    assert meter.by_role()[role].total_tokens > 0


# --- the algorithms --------------------------------------------------------------------


def gepa_setup(**settings: Any) -> Setup:
    from test_gepa_support import reflection_lm, task_lm, word_problems

    from emery.data.tasks import builtin_task
    from emery.lm import FakeLM
    from emery.systems.prompt_program import PromptProgram
    from emery.verifiers.config import VerifierConfig, build_verifier

    data = word_problems(n_train=12, n_val=4, n_test=2)
    return Setup(
        algorithm="gepa",
        settings={"minibatch_size": 3, "max_iterations": 4, "proposals_per_step": 1, **settings},
        system=lambda: PromptProgram(builtin_task("word_problems").program),
        dataset=data,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        models=lambda: {
            "task": task_lm(data),
            "reflection": reflection_lm(),
            "judge": FakeLM(lambda m: "Yes, it reads right.", model="fake/judge"),
        },
    )


async def test_gepa_stops_at_a_reflection_call_past_the_limit() -> None:
    await check_cut_at(gepa_setup(), "reflection")


async def test_gepa_stops_at_a_judge_call_inside_a_batch() -> None:
    await check_cut_at(gepa_setup(), "judge")


async def test_the_cost_limit_stops_a_step_at_the_same_call() -> None:
    """At $1 a token, ``lm_cost_usd`` = the tokens up to a reflection call cuts there too."""
    setup = gepa_setup()
    cut, limit, reference, _ = await limit_at(setup, "reflection")
    setup.price = Price(input_per_mtok=1e6, output_per_mtok=1e6)
    setup.budget = {"lm_cost_usd": float(limit)}
    log, meter, _, reason = await run(setup)
    assert log.calls == reference.calls[: cut + 1]
    assert reason == f"lm_cost_usd: {limit:g} of {limit:g} used"
    assert meter.total().cost_usd == pytest.approx(limit)


async def test_a_warm_lm_cache_stops_the_search_where_a_cold_one_did(tmp_path: Path) -> None:
    """Calls the LM cache answers count at the tokens they first took: a step resumed
    after a kill (its calls cached) stops where the uninterrupted one did."""
    setup = gepa_setup()
    _, limit, _, _ = await limit_at(setup, "reflection")
    cache = ResponseCache(tmp_path / "lm_cache.db")
    _, cold, cold_records, cold_reason = await run(setup, lm_tokens=limit, cache=cache)
    _, warm, warm_records, warm_reason = await run(setup, lm_tokens=limit, cache=cache)
    assert warm_reason == cold_reason == f"lm_tokens: {limit} of {limit} used"
    assert [r.state for r in warm_records] == [r.state for r in cold_records]
    total = warm.total()
    assert total.cache_hits == total.calls == cold.total().calls
    assert total.total_tokens == 0
    assert total.budget_tokens == limit


ASK = "Improve this instruction:\n```\nSolve the problem.\n```"


class Killed(Exception):
    """The process dies here (a SIGKILL, as far as the search can tell)."""


class KillAt(LMWrapper):
    """Raises ``Killed`` instead of its ``at``-th call (a count shared through ``count``)."""

    def __init__(self, inner: LM, count: list[int], at: int) -> None:
        super().__init__(inner)
        self.count, self.at = count, at

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        self.count[0] += 1
        if self.count[0] == self.at:
            raise Killed()
        return await self.inner.complete(messages, **params)


async def test_a_run_killed_mid_step_resumes_to_where_the_token_limit_ended_it(
    tmp_path: Path,
) -> None:
    """Killed in the middle of a step with the LM cache on, then resumed from its last
    checkpoint (stored results, spending and usage; the cache keeps the calls made before
    the kill): the search stops at the same call of the same step as an uninterrupted one."""
    setup = gepa_setup()
    reference, _, _, _ = await run(setup)
    late = mid_step_call(reference, "reflection")
    limit = sum(tokens for _, tokens in reference.calls[: late + 1])
    _, full_meter, full_records, full_reason = await run(
        setup, lm_tokens=limit, cache=ResponseCache(tmp_path / "full.db")
    )

    cache, count = ResponseCache(tmp_path / "killed.db"), [0]
    models = setup.models
    killing = Setup(  # killed as the first step asks for its reflection
        **{
            **setup.__dict__,
            "models": lambda: {
                role: KillAt(lm, count, 1) if role == "reflection" else lm
                for role, lm in models().items()
            },
        }
    )
    first: list[StepRecord] = []
    with pytest.raises(Killed):
        await run(killing, lm_tokens=limit, cache=cache, records=first)
    assert len(first) == 1  # the start

    meter = UsageMeter(dict(first[-1].usage))
    budget = BudgetConfig(lm_tokens=limit)
    ctx = context(setup, CallLog(), meter, budget, cache, resume=first)
    second: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        second.append(record)

    algorithm = build_algorithm(setup.algorithm, setup.settings)
    state = type(first[-1].state).model_validate_json(first[-1].state.model_dump_json())
    outcome = await run_search(algorithm, ctx, state=state, on_step=keep)

    assert outcome.reason == full_reason == f"lm_tokens: {limit} of {limit} used"
    assert [r.state for r in first + second] == [r.state for r in full_records]
    assert sum(u.budget_tokens for u in meter.by_role().values()) == limit
    assert full_meter.total().budget_tokens == limit


class Swallowing:
    """Scores the seed; each step asks the reflection model three times, ignoring errors."""

    name = "swallowing"
    state_type = AlgorithmState

    async def start(self, ctx: SearchContext) -> AlgorithmState:
        seed = ctx.add_candidate(ctx.seed_candidate)
        scored = await ctx.evaluate(seed, ctx.val, "val")
        return AlgorithmState(
            seed_candidate_id=seed.id, best_candidate_id=seed.id, best_val_score=scored.mean
        )

    async def step(self, ctx: SearchContext, state: AlgorithmState) -> AlgorithmState:
        for _ in range(3):
            with contextlib.suppress(BudgetExhausted):
                await ctx.lm("reflection").complete([{"role": "user", "content": ASK}])
        state.iteration += 1
        state.done = state.iteration >= 3
        return state


async def test_a_step_that_goes_on_after_a_refused_call_is_not_kept() -> None:
    setup = gepa_setup()
    log, meter = CallLog(), UsageMeter()
    seed_only = context(setup, log, meter, BudgetConfig())
    await Swallowing().start(seed_only)
    limit = sum(tokens for _, tokens in log.calls) + 1  # the step's first call reaches it

    log, meter = CallLog(), UsageMeter()
    ctx = context(setup, log, meter, BudgetConfig(lm_tokens=limit))
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    outcome = await run_search(Swallowing(), ctx, on_step=keep)
    assert [role for role, _ in log.calls].count("reflection") == 1  # two calls refused
    assert outcome.reason.startswith("lm_tokens")
    assert len(records) == 1  # the start only: the step that swallowed the refusal is undone
    assert outcome.state.iteration == 0


def graph_gepa_setup() -> Setup:
    from test_gepa_support import word_problems

    from emery.lm import FakeLM
    from emery.systems.graph.spec import GraphConfig
    from emery.systems.graph.system import GraphSystem
    from emery.verifiers.config import VerifierConfig, build_verifier

    data = word_problems(n_train=6, n_val=4, n_test=2)
    gold = {str(e.input["question"]): int(e.expected) for e in data}

    def solve(messages: Sequence[ChatMessage]) -> str:
        question = messages[-1]["content"].split("\n")[0].removeprefix("Problem: ")
        careful = "carefully" in next((m["content"] for m in messages), "")
        return f"Answer: {gold.get(question, 0) + (0 if careful else 1)}"

    rewrite = "```\nSolve the problem carefully. End with 'Answer: <number>'.\n```"
    return Setup(
        algorithm="graph_gepa",
        settings={"max_iterations": 3, "stop_when_perfect": False, "skip_perfect": False},
        system=lambda: GraphSystem(GraphConfig.model_validate(GRAPH)),
        dataset=data,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        models=lambda: {
            "task": FakeLM(solve, model="fake/task"),
            "reflection": FakeLM(lambda _: rewrite, model="fake/proposer"),
        },
    )


async def test_graph_gepa_stops_at_a_reflection_call_past_the_limit() -> None:
    await check_cut_at(graph_gepa_setup(), "reflection")


def apo_setup() -> Setup:
    import test_apo_support as apo

    from emery.lm import FakeLM

    data = apo.dataset()
    return Setup(
        algorithm="apo",
        settings=apo.settings(proposals_per_step=1).model_dump(),
        system=apo.program,
        dataset=data,
        verifier=apo.NumericMatch(),
        models=lambda: {
            "task": FakeLM(apo.task_reply, model="fake/task"),
            "reflection": apo.reflection_lm(apo.fenced("Reply. Answer: with the number.")),
        },
    )


async def test_apo_stops_at_a_critique_or_edit_past_the_limit() -> None:
    await check_cut_at(apo_setup(), "reflection")


def mipro_setup() -> Setup:
    import test_mipro_support as mipro

    from emery.systems.prompt_program import PromptProgram
    from emery.verifiers.config import build_verifier

    data = mipro.dataset(n_train=6, n_val=6)
    return Setup(
        algorithm="mipro",
        settings={"num_trials": 2, "num_instructions": 2, "max_bootstrapped_demos": 1},
        system=lambda: PromptProgram(mipro.TASK.program),
        dataset=data,
        verifier=build_verifier(mipro.TASK.verifier),
        models=lambda: {
            "task": mipro.format_and_demos_lm(data),
            "proposer": mipro.proposer_lm(),
        },
    )


async def test_mipro_stops_at_a_proposer_call_past_the_limit() -> None:
    await check_cut_at(mipro_setup(), "proposer")


async def test_the_budget_line_comes_before_the_plan_and_names_every_limit() -> None:
    setup = gepa_setup(max_iterations=1)
    setup.budget = {"metric_calls": 300, "lm_cost_usd": 0.25, "wall_time_s": 600}
    _, _, records, _ = await run(setup, lm_tokens=50_000)
    first, plan = records[0].events[:2]
    assert (first.kind, plan.kind) == ("budget_planned", "gepa.plan")
    assert describe_event(first) == (
        "budget: 300 metric calls; 50000 LM tokens and $0.25 of LM cost over task,"
        " reflection, proposer and judge calls together, checked before each call and"
        " rollout (cache hits count); 600 s search time (a step is cut when it runs out;"
        " the test scoring after the search not counted)"
    )
    assert not [e for r in records[1:] for e in r.events if e.kind == "budget_planned"]


def test_the_report_shows_lm_spending_against_the_limits_by_role() -> None:
    result = spent_result()
    lines = render_report(result).splitlines()
    assert (
        "  LM tokens 1290 of 1200 in the search, all roles together (judge 130, reflection 360,"
        " task 800; 30 answered from the cache); 1330 with the test scoring"
    ) in lines
    assert (
        "  LM cost $0.0130 of $0.5 in the search, all roles together (judge $0.0030,"
        " reflection $0.0000, task $0.0100)"
    ) in lines
    page = render_html(ReportData(result, [], [], {}, {}))
    assert "· LM tokens 1290 of 1200 · LM cost $0.0130 of $0.5</p>" in page


def spent_result() -> JobResult:
    search = {
        "task": RoleUsage(calls=40, prompt_tokens=700, completion_tokens=100, cost_usd=0.01),
        "reflection": RoleUsage(calls=3, prompt_tokens=300, completion_tokens=60),
        "judge": RoleUsage(
            calls=5,
            cache_hits=2,
            prompt_tokens=80,
            completion_tokens=20,
            cached_tokens=30,
            cost_usd=0.002,
            cached_cost_usd=0.001,
        ),
    }
    tests = RoleUsage(calls=4, prompt_tokens=30, completion_tokens=10)
    return JobResult(
        job_id="j-1",
        name="roles",
        kind="optimize",
        algorithm="gepa",
        state="succeeded",
        stop_reason="lm_tokens: 1290 of 1200 used",
        limits=BudgetConfig(lm_tokens=1200, lm_cost_usd=0.5),
        search_usage=search,
        usage={**search, "task": search["task"].add(tests)},
    )


def test_a_cost_limit_needs_a_priced_model() -> None:
    config: dict[str, Any] = {
        "dataset": {"task": "word_problems"},
        "lm": {"task": {"model": "fake/task"}},
        "job": {"budget": {"lm_cost_usd": 1.0}},
    }
    with pytest.raises(ConfigError, match="lm_cost_usd: no model has a price"):
        parse_config(config)
    config["lm"]["reflection"] = {"model": "openai/gpt-4o-mini"}  # a table price
    assert parse_config(config).job.budget.lm_cost_usd == 1.0
    config["lm"] = {"task": {"model": "fake/task", "price_output_per_mtok": 2.0}}
    assert parse_config(config).job.budget.lm_cost_usd == 1.0

"""Warm starts (``[job] warm_start``): a search starts from an earlier job's candidates,
rescored on its own val, with lineage to the earlier job; a bad warm start is one error
line; a job killed after the warm step resumes exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import test_apo_support as apo_support
import test_mipro_support as mipro_support
from test_apo_resume import fingerprint, varied_reflection
from test_gepa_resume import checkpoint, known_results, restore_candidates, summary
from test_gepa_support import (
    FORMAT_RULE,
    RULES,
    reflection_lm,
    run_gepa,
    task_lm,
    word_problem_context,
)

from emery.algorithms import StepRecord
from emery.algorithms.apo import Apo, ApoState
from emery.algorithms.base import WARM_START, WarmStart
from emery.algorithms.mipro import MiproSettings
from emery.algorithms.mipro.state import MiproState
from emery.config import parse_config
from emery.core.approvals import Approval
from emery.core.errors import ConfigError
from emery.core.models import Candidate, Dataset, Lineage
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.jobs.manage import create_job, run_job
from emery.lm import FakeLM
from emery.lm.usage import UsageMeter
from emery.sdk.arguments import optimize_config
from emery.store import MemoryStore
from emery.systems.prompt_program import PromptProgram

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")

PROGRAM = builtin_task("word_problems").program
GOOD = f"Answer the question. {FORMAT_RULE} " + " ".join(RULES.values())


def word_problems() -> Dataset:
    return builtin_task("word_problems").dataset(seed=0, n_train=4, n_val=4, n_test=2)


def program(instruction: str, stage: str = "solve") -> PromptProgram:
    first = PROGRAM.stages[0].model_copy(update={"instruction": instruction, "name": stage})
    return PromptProgram(PROGRAM.model_copy(update={"stages": [first]}))


def create(
    store: MemoryStore,
    tmp_path: Path,
    system: PromptProgram,
    data: Dataset,
    *,
    algorithm: str = "gepa",
    warm_start: str | None = None,
    name: str | None = None,
    reflection: FakeLM | None = None,
) -> str:
    """A GEPA job on ``system`` with the scripted models (``warm_start``: the earlier job)."""
    config, given, inputs = optimize_config(
        system=system,
        dataset=data,
        algorithm=algorithm,
        budget=40,
        verifier="numeric",
        lm=task_lm(data),
        reflection_lm=reflection,
        seed=0,
        settings=None,
        runtime={"workdir": str(tmp_path / ".emery")},
        name=name,
        workdir=tmp_path / ".emery",
        warm_start=warm_start,
    )
    record = create_job(store, config, given=given, inputs=inputs, name=name)
    assert run_job(store, record.id, inputs=inputs).state == "succeeded"
    return record.id


def test_a_warm_started_gepa_job_starts_from_the_earlier_best(tmp_path: Path) -> None:
    data, store = word_problems(), MemoryStore()
    earlier = create(store, tmp_path, program(GOOD), data)
    good = store.get_job(earlier).best_candidate_id
    job_id = create(store, tmp_path, program("Answer the question."), data, warm_start=earlier)

    job = store.get_job(job_id)
    assert job.baseline_score == 0.0
    assert (job.best_candidate_id, job.best_score) == (good, 1.0)
    stored = {c.id: c for c in store.job_candidates(job_id)}
    assert stored[good].lineage.operation == WARM_START
    assert stored[good].lineage.details["job_id"] == earlier
    assert stored[good].lineage.details["candidate_id"] == good
    events = store.list_events(job_id)
    scored = [e.data for e in events if e.kind == "warm_start.scored"]
    assert scored == [
        {"job_id": earlier, "candidate_id": good, "earlier_score": 1.0, "score": 1.0, "n": 4}
    ]
    plan = next(e.data for e in events if e.kind == "gepa.plan")
    assert plan["notes"][-1] == (
        f"warm start from {earlier} (gepa, its Pareto front): 1 candidate rescored on all 4"
        " val examples first, up to 4 metric calls of this budget"
    )


def test_the_earlier_jobs_rejection_reasons_reach_the_warm_started_reflection(
    tmp_path: Path,
) -> None:
    """A reason given when the earlier job's winner was refused for publishing is what the
    next round's reflection reads (decided after this job was created: not shown)."""
    data, store = word_problems(), MemoryStore()
    earlier = create(store, tmp_path, program("Answer the question."), data)
    best = store.get_job(earlier).best_candidate_id or ""
    store.add_approval(Approval(id="p1", job_id=earlier, kind="publish", candidate_id=best))
    store.decide_approval("p1", "reject", reason="customers want the number alone")
    reflection = reflection_lm()
    create(store, tmp_path, program("Answer the question."), data, warm_start=earlier,
           reflection=reflection)  # fmt: skip

    prompts = [call[-1]["content"] for call in reflection.calls]
    assert prompts
    assert all("customers want the number alone" in prompt for prompt in prompts)


def test_a_weekly_job_warm_starts_from_the_last_job_of_its_name(tmp_path: Path) -> None:
    """The name is resolved when the job is created: when it runs, the newest job of that
    name is the job itself."""
    data, store = word_problems(), MemoryStore()
    earlier = create(store, tmp_path, program(GOOD), data, name="weekly")
    job_id = create(
        store, tmp_path, program("Answer the question."), data, warm_start="weekly", name="weekly"
    )
    job = store.get_job(job_id)
    assert job.best_candidate_id == store.get_job(earlier).best_candidate_id
    assert job.config["job"]["warm_start"] == "weekly"  # as written
    assert (job.resolved_config or {})["job"]["warm_start"] == earlier


def test_a_bad_warm_start_is_one_error_line_and_stores_no_job(tmp_path: Path) -> None:
    data, store = word_problems(), MemoryStore()
    earlier = create(store, tmp_path, program(GOOD), data)
    cases = [
        ("j-nothing", program("Answer."), "gepa", "job.warm_start: no job 'j-nothing'"),
        (
            earlier,
            program("Answer.", stage="answer"),
            "gepa",
            f"job.warm_start: job {earlier} optimized the components solve, this system has"
            " answer: a warm start needs the same system",
        ),
        (earlier, program("Answer."), "baseline", "algorithm 'baseline' cannot start from"),
    ]
    for warm_start, system, algorithm, expected in cases:
        with pytest.raises(ConfigError) as raised:
            create(store, tmp_path, system, data, algorithm=algorithm, warm_start=warm_start)
        assert expected in str(raised.value)
        assert "\n" not in str(raised.value)
    assert [job.id for job in store.list_jobs(limit=None).items] == [earlier]


def warm(ctx: Any, instruction: str, job_id: str = "j-earlier") -> WarmStart:
    """A warm start holding the seed with ``instruction`` (as the loader makes it)."""
    seed = ctx.seed_candidate
    details = {"job_id": job_id, "candidate_id": "c", "earlier_val_score": 0.5}
    candidate = Candidate(
        components={**seed.components, "solve": instruction},
        demos=seed.demos,
        lineage=Lineage(operation=WARM_START, details=details),
    )
    return WarmStart(job_id=job_id, algorithm="gepa", candidates=(candidate,))


async def test_mipro_takes_the_earlier_program_as_best_choice_and_trial() -> None:
    data = mipro_support.dataset(n_train=6, n_val=6)
    ctx = mipro_support.make_ctx(
        data,
        mipro_support.format_and_demos_lm(data),
        mipro_support.proposer_lm(),
        budget=BudgetConfig(metric_calls=60),
    )
    ctx.warm = warm(ctx, "Solve it. End with a final line 'Answer: <number>'.")
    candidate = ctx.warm.candidates[0]
    settings = MiproSettings(num_trials=2, max_bootstrapped_demos=0, use_dataset_summary=False)
    outcome, records = await mipro_support.run_recorded(settings, ctx, stop_after=4)
    state = outcome.state
    assert isinstance(state, MiproState)
    started = MiproState.model_validate(records[0].state.model_dump())
    assert started.best_candidate_id == candidate.id
    assert started.best_val_score is not None
    assert started.best_val_score > 0
    assert [w.candidate.id for w in started.warm] == [candidate.id]
    assert [c.kind for c in state.demo_sets["solve"]].count("warm") == 0  # the seed's own
    texts = [(c.text, c.source) for c in state.instructions["solve"]]
    assert (candidate.components["solve"], "warm") in texts
    trial = next(t for t in state.trials if t.candidate_id == candidate.id)
    assert (trial.kind, trial.number, trial.score) == ("full", 0, started.best_val_score)
    assert state.combos[candidate.id].full_score == started.best_val_score


async def test_apo_puts_the_earlier_candidate_in_its_beam() -> None:
    reflection = apo_support.reflection_lm([apo_support.fenced("Reply.")])
    ctx = apo_support.context(reflection, budget=BudgetConfig(metric_calls=60))
    ctx.warm = warm(ctx, "Reply. End with the line Answer: <number>.")
    candidate = ctx.warm.candidates[0]
    _, records = await apo_support.run(ctx, Apo(apo_support.settings()), should_stop=lambda: "stop")
    state = records[0].state
    assert isinstance(state, ApoState)
    assert state.best_candidate_id == candidate.id
    assert state.best_val_score == 1.0
    assert state.beam[0] == candidate.id
    assert state.full_val_scores[candidate.id] == 1.0


async def test_a_job_killed_after_the_warm_step_resumes_exactly() -> None:
    data = word_problems()
    budget = BudgetConfig(metric_calls=40)
    partial = f"Answer the question. {FORMAT_RULE}"

    def context(**kwargs: Any) -> Any:
        return word_problem_context(data, budget=budget, **kwargs)

    full_ctx = context()
    full_ctx.warm = warm(full_ctx, partial)
    full, full_records = await run_gepa(full_ctx)

    first: list[StepRecord] = []
    killed_ctx = context()
    killed_ctx.warm = warm(killed_ctx, partial)
    outcome, _ = await run_gepa(
        killed_ctx, should_stop=lambda: "killed" if first else None, records=first
    )
    assert outcome.reason == "killed"
    assert len(first) == 1
    assert [e.kind for e in first[0].events].count("warm_start.scored") == 1

    resumed_ctx = context(
        meter=UsageMeter(dict(first[-1].usage)),
        known=known_results(first),
        budget_usage=first[-1].budget.model_copy(deep=True),
    )  # no warm start: the engine loads it only for the first step
    restore_candidates(resumed_ctx, first)
    rest: list[StepRecord] = []
    resumed, _ = await run_gepa(resumed_ctx, state=checkpoint(first), records=rest)

    assert summary(resumed.state) == summary(full.state)
    assert len(full_records) > 2  # the search went on after the warm step
    assert resumed_ctx.budget.usage.metric_calls == full_ctx.budget.usage.metric_calls
    assert [e.kind for r in first + rest for e in r.events] == [
        e.kind for r in full_records for e in r.events
    ]


def test_warm_start_goes_with_a_prompt_search_only() -> None:
    config = {
        "job": {"type": "sft", "warm_start": "j-earlier"},
        "dataset": {"task": "word_problems"},
        "lm": {"task": {"model": "local/smollm2-135m"}},
        "sft": {"data": "chat.jsonl"},
    }
    with pytest.raises(ConfigError, match='warm_start seeds a prompt search, not a type = "sft"'):
        parse_config(config)


async def test_mipro_killed_after_the_warm_step_resumes_exactly() -> None:
    data = mipro_support.dataset(n_train=6, n_val=6)
    budget = BudgetConfig(metric_calls=48)
    settings = MiproSettings(num_trials=2, max_bootstrapped_demos=0, use_dataset_summary=False)
    instruction = "Solve it. End with a final line 'Answer: <number>'."

    def context() -> Any:
        lm, proposer = mipro_support.format_and_demos_lm(data), mipro_support.proposer_lm()
        ctx = mipro_support.make_ctx(data, lm, proposer, budget=budget)
        ctx.warm = warm(ctx, instruction)
        return ctx

    full, full_records = await mipro_support.run_recorded(settings, context())
    _, first = await mipro_support.run_recorded(settings, context(), stop_after=1)
    resumed_ctx = mipro_support.resumed_ctx(
        data,
        mipro_support.format_and_demos_lm(data),
        mipro_support.proposer_lm(),
        first,
        budget=budget,
    )  # no warm start: the engine loads it only for the first step
    state = MiproState.model_validate_json(first[-1].state.model_dump_json())
    resumed, rest = await mipro_support.run_recorded(settings, resumed_ctx, state=state)

    assert len(first) == 1
    assert any(t.candidate_id == state.warm[0].candidate.id for t in full.state.trials)
    assert resumed.state.model_dump() == full.state.model_dump()
    assert mipro_support.event_kinds(first + rest) == mipro_support.event_kinds(full_records)


async def test_apo_killed_after_the_warm_step_resumes_exactly() -> None:
    apo_settings = {"rounds": 2, "beam_width": 2, "branch_factor": 2, "val_batch_size": 4}

    def context(**kwargs: Any) -> Any:
        return apo_support.context(varied_reflection(), **kwargs)

    full_ctx = context()
    full_ctx.warm = warm(full_ctx, apo_support.HALF)
    full, full_records = await apo_support.run(full_ctx, Apo(apo_support.settings(**apo_settings)))
    killed_ctx = context()
    killed_ctx.warm = warm(killed_ctx, apo_support.HALF)
    _, first = await apo_support.run(
        killed_ctx, Apo(apo_support.settings(**apo_settings)), should_stop=lambda: "stop"
    )
    state = ApoState.model_validate_json(first[-1].state.model_dump_json())
    resumed_ctx = context(
        known=apo_support.stored_results(first), budget_usage=first[-1].budget
    )  # no warm start: the engine loads it only for the first step
    resumed, rest = await apo_support.run(
        resumed_ctx, Apo(apo_support.settings(**apo_settings)), state=state
    )

    assert len(first) == 1
    assert len(full_records) > 2
    assert full_ctx.warm.candidates[0].id in state.pool
    assert resumed.state == full.state
    assert fingerprint(first + rest) == fingerprint(full_records)

"""The wall-time budget honoured mid-step, in GEPA, graph GEPA, APO, MIPRO and the baseline.

Every model call (task, reflection, proposer, judge) takes one second on a fake clock
(``walltime_support.FakeClock``; nothing sleeps). Each test runs an algorithm once without a
wall-time limit, logging every call and where each committed step ended; then picks a call
in the middle of a step and runs again with ``wall_time_s`` equal to the clock after that
call. The second run must make exactly those calls and no more: the step stops when the
time runs out, not at its end, it is not committed, the search ends with the best of the
steps before it and the stop reason names the wall time. A step waiting on a call that
does not return is cut at the deadline (a clock that runs in real time, milliseconds).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
import walltime_support as wt
from test_role_budgets import (
    CallLog,
    KillAt,
    Killed,
    Setup,
    apo_setup,
    context,
    gepa_setup,
    graph_gepa_setup,
    mid_step_call,
    mipro_setup,
)

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.config import parse_config
from emery.core.models import ChatMessage
from emery.evaluation.budget import BudgetConfig
from emery.jobs import JobEngine, create_job, run_job
from emery.lm.base import LM, Completion
from emery.lm.usage import UsageMeter
from emery.lm.wrapper import LMWrapper
from emery.reports.event_text import describe_event
from emery.reports.job_result import JobResult
from emery.reports.report import render_report
from emery.store import MemoryStore

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


class Ticking(LMWrapper):
    """``inner``, each call taking one second on ``clock``."""

    def __init__(self, inner: LM, clock: wt.FakeClock) -> None:
        super().__init__(inner)
        self.clock = clock

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        self.clock.advance(1.0)
        return await self.inner.complete(messages, **params)


@dataclass
class Run:
    """One search: its calls, committed steps, stop reason and final state."""

    log: CallLog
    records: list[StepRecord] = field(default_factory=list)
    reason: str = ""
    best: str = ""


async def run_timed(
    setup: Setup,
    wall_time_s: float | None = None,
    *,
    run: Run | None = None,
    resume: Sequence[StepRecord] = (),
) -> Run:
    """Run ``setup``'s search on a fresh fake clock (continuing from the committed steps
    ``resume`` as the engine does after a kill)."""
    clock = wt.FakeClock()
    models = setup.models
    ticking = Setup(
        **{
            **setup.__dict__,
            "models": lambda: {role: Ticking(lm, clock) for role, lm in models().items()},
        }
    )
    budget = BudgetConfig.model_validate({**setup.budget, "wall_time_s": wall_time_s})
    run = run or Run(CallLog())
    meter = UsageMeter(dict(resume[-1].usage)) if resume else UsageMeter()
    ctx = context(ticking, run.log, meter, budget, resume=resume)
    ctx.budget.clock = clock
    state = None
    if resume:
        last = resume[-1].state
        state = type(last).model_validate_json(last.model_dump_json())

    async def keep(record: StepRecord) -> None:
        run.records.append(record)
        run.log.commits.append(len(run.log.calls))

    algorithm = build_algorithm(setup.algorithm, setup.settings)
    outcome = await run_search(algorithm, ctx, state=state, on_step=keep)
    run.reason, run.best = outcome.reason, outcome.state.best_candidate_id
    return run


async def check_wall_cut_at(setup: Setup, *roles: str, step: int = 1) -> Run:
    """Cut the search at the first call of ``roles`` in the middle of step ``step`` or
    later; check it stops there with the best of the committed steps. Returns the cut run."""
    reference = await run_timed(setup)
    cut = mid_step_call(reference.log, *roles, step=step)
    cut_step = next(i for i, made in enumerate(reference.log.commits) if made > cut)
    limit = cut + 1  # the clock after that call: one second a call

    timed = await run_timed(setup, wall_time_s=limit)

    assert timed.log.calls == reference.log.calls[: cut + 1]  # not one call after the time
    assert reference.log.commits[cut_step] > cut + 1  # the step had more calls to make
    assert timed.reason == f"wall_time_s: {limit} of {limit} used"
    assert len(timed.records) == cut_step  # the cut step is not committed
    kept = reference.records[:cut_step]
    assert [r.state for r in timed.records] == [r.state for r in kept]
    assert timed.best == kept[-1].state.best_candidate_id  # the best so far
    return timed


async def test_gepa_stops_at_the_reflection_call_that_spends_the_time() -> None:
    await check_wall_cut_at(gepa_setup(), "reflection")


async def test_gepa_stops_inside_a_minibatch_when_the_time_runs_out() -> None:
    """Cut after a rollout's last call (its judge's): a rollout is not cut mid-way."""
    await check_wall_cut_at(gepa_setup(), "judge", step=2)


async def test_gepa_with_two_children_a_step_stops_at_the_time_too() -> None:
    await check_wall_cut_at(gepa_setup(proposals_per_step=2), "reflection")


async def test_graph_gepa_stops_at_the_reflection_call_that_spends_the_time() -> None:
    await check_wall_cut_at(graph_gepa_setup(), "reflection")


async def test_apo_stops_at_a_critique_or_edit_when_the_time_runs_out() -> None:
    await check_wall_cut_at(apo_setup(), "reflection")


async def test_mipro_stops_in_its_dataset_summary_or_proposals() -> None:
    await check_wall_cut_at(mipro_setup(), "proposer")


async def test_mipro_whose_bootstrapping_outlasts_the_time_ends_with_the_seed() -> None:
    reference = await run_timed(mipro_setup())
    start = reference.log.commits[0]
    bootstrap = reference.records[1].events
    assert any(e.kind == "mipro.demos_bootstrapped" for e in bootstrap)
    assert reference.log.commits[1] - start > 1  # several teacher runs in that step

    timed = await check_wall_cut_at(mipro_setup(), "task", step=1)

    assert len(timed.log.calls) == start + 1  # one teacher run, then the time was out
    assert len(timed.records) == 1  # the seed's start only
    assert timed.best == reference.records[0].state.seed_candidate_id


async def test_a_run_killed_mid_step_resumes_to_where_the_wall_time_ended_it() -> None:
    """Killed as its first step asks for a reflection, then resumed from its checkpoint on a
    new clock (the killed step's time died with the process): the repeated steps take the
    same time, so the search stops at the same call of the same step as an uninterrupted
    run, with the same committed states."""
    setup = gepa_setup()
    reference = await run_timed(setup)
    cut = mid_step_call(reference.log, "reflection", step=2)
    limit = cut + 1
    full = await run_timed(setup, wall_time_s=limit)

    count, models = [0], setup.models
    killing = Setup(
        **{
            **setup.__dict__,
            "models": lambda: {
                role: KillAt(lm, count, 1) if role == "reflection" else lm
                for role, lm in models().items()
            },
        }
    )
    first = Run(CallLog())
    with pytest.raises(Killed):
        await run_timed(killing, wall_time_s=limit, run=first)
    assert len(first.records) == 1  # the start

    second = await run_timed(setup, wall_time_s=limit, resume=first.records)

    start = reference.log.commits[0]
    assert second.log.calls == reference.log.calls[start : cut + 1]
    assert second.reason == full.reason == f"wall_time_s: {limit} of {limit} used"
    assert [r.state for r in first.records + second.records] == [r.state for r in full.records]


def baseline_setup() -> Setup:
    setup = gepa_setup()
    candidates = [{"solve": f"Variant {i}: solve it."} for i in range(3)]
    settings = {"candidates": candidates}
    return Setup(**{**setup.__dict__, "algorithm": "baseline", "settings": settings})


async def test_the_baseline_stops_inside_a_candidates_scoring() -> None:
    await check_wall_cut_at(baseline_setup(), "task")


# --- in-flight work cut at the deadline ----------------------------------------------------


class StepClock:
    """Real seconds, counted only from ``go`` on (the seed's start costs none)."""

    def __init__(self) -> None:
        self.since: float | None = None

    def go(self) -> None:
        self.since = time.perf_counter() if self.since is None else self.since

    def __call__(self) -> float:
        return 0.0 if self.since is None else time.perf_counter() - self.since


class Stuck(LMWrapper):
    """A model that never answers: starts ``clock`` and waits until cancelled."""

    def __init__(self, inner: LM, clock: StepClock, cancelled: list[bool]) -> None:
        super().__init__(inner)
        self.clock, self.cancelled = clock, cancelled

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        self.clock.go()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(True)
            raise
        raise AssertionError("unreachable")


async def test_a_call_in_flight_is_cut_when_the_time_runs_out() -> None:
    setup, clock, cancelled = gepa_setup(), StepClock(), list[bool]()
    models = setup.models
    stuck = Setup(
        **{
            **setup.__dict__,
            "models": lambda: {
                role: Stuck(lm, clock, cancelled) if role == "reflection" else lm
                for role, lm in models().items()
            },
        }
    )
    ctx = context(stuck, CallLog(), UsageMeter(), BudgetConfig(wall_time_s=0.02))
    ctx.budget.clock = clock
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    algorithm = build_algorithm(setup.algorithm, setup.settings)
    outcome = await asyncio.wait_for(run_search(algorithm, ctx, on_step=keep), timeout=10)

    assert cancelled == [True]  # the reflection call was cut, not waited for
    assert outcome.reason.startswith("wall_time_s: ")
    assert outcome.reason.endswith(" of 0.02 used")
    assert len(records) == 1  # the start; the cut step is not committed
    assert outcome.state == records[0].state
    assert ctx.budget.usage.wall_time_s >= 0.02  # the cut step's time counts


# --- a job: plan line, stop reason, report --------------------------------------------------


@pytest.fixture
def fresh_clock() -> Any:
    wt.CLOCK.now = 0.0
    yield wt.CLOCK
    wt.CLOCK.now = 0.0


def test_a_mipro_job_ends_in_its_bootstrapping_with_the_seed(
    tmp_path: Path, fresh_clock: wt.FakeClock
) -> None:
    """The production benchmark's case: the time runs out before MIPRO's first trial."""
    config = js.search_config(  # the seed: 8 val runs (8 s); bootstrapping: 2 runs
        tmp_path / ".emery",
        budget={"wall_time_s": 9},
        algorithm="mipro",
        settings={"num_trials": 2, "max_bootstrapped_demos": 2},
        concurrency=1,
    )
    config["lm"]["task"]["model"] = "python/walltime_support:task_lm"  # a second a call
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id
    job = run_job(store, job_id, engine=JobEngine(store, job_id, clock=fresh_clock))

    assert job.state == "succeeded", job.error
    result = JobResult.model_validate(job.result)
    assert job.stop_reason == "wall_time_s: 9 of 9 used"  # one teacher run, then cut
    assert not store.list_events(job.id, kinds=["mipro.demos_bootstrapped"])
    assert not store.list_events(job.id, kinds=["iteration_completed"])
    assert result.best_candidate is not None
    assert result.seed_candidate is not None
    assert result.best_candidate.id == result.seed_candidate.id
    assert result.budget.wall_time_s == 9  # the cut step's time counts in the report
    [planned] = store.list_events(job.id, kinds=["budget_planned"])
    assert "9 s search time (a step is cut when it runs out" in describe_event(planned)
    assert "search time 9.0s of 9s" in render_report(result)
    [cut] = store.list_events(job.id, kinds=["search_not_run"])
    assert cut.data == {"limit": "wall_time_s", "reason": job.stop_reason, "first_step": True}
    warning = (
        "the search completed no step: the wall-time budget ran out in its first step"
        " (wall_time_s: 9 of 9 used), so the best is the seed; raise job.budget.wall_time_s"
        " to search"
    )
    assert warning in result.warnings
    assert f"warning: {warning}" in " ".join(render_report(result).split())


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_job_that_kept_a_step_has_no_such_warning(
    tmp_path: Path, fresh_clock: wt.FakeClock
) -> None:
    config = js.search_config(  # the seed 8 s, then 6 s a step (14 with a val scoring)
        tmp_path / ".emery", budget={"wall_time_s": 30}, iterations=8, concurrency=1
    )
    config["lm"]["task"]["model"] = "python/walltime_support:task_lm"
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id
    job = run_job(store, job_id, engine=JobEngine(store, job_id, clock=fresh_clock))

    assert job.state == "succeeded", job.error
    assert (job.stop_reason or "").startswith("wall_time_s: ")
    assert store.list_events(job.id, kinds=["iteration_completed"])
    assert not store.list_events(job.id, kinds=["search_not_run"])


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_pause_mid_step_under_a_wall_time_budget_resumes_exactly(tmp_path: Path) -> None:
    """A step timed against the wall time runs as a task of its own: a pause still cuts
    it, stores its finished runs, and the resumed job ends where an unpaused one does."""
    from test_pause_commits import CountingTaskLM

    from emery.config.resolve import JobInputs
    from emery.jobs.prepaid import PREPAID

    def start(store: MemoryStore, folder: Path, lm: CountingTaskLM) -> tuple[str, JobInputs]:
        data = js.search_config(
            folder / ".emery", iterations=4, concurrency=1, budget={"wall_time_s": 3600}
        )
        data["runtime"]["cache"] = False
        inputs = JobInputs(lms={"task": lm, "reflection": js.reflection_lm()})
        return create_job(store, parse_config(data), base_dir=folder, inputs=inputs).id, inputs

    other = MemoryStore()
    job_id, inputs = start(other, tmp_path / "ref", CountingTaskLM())
    reference = run_job(other, job_id, engine=JobEngine(other, job_id, inputs=inputs))

    store, engine = MemoryStore(), None

    def pause_mid_step(call: int) -> None:
        if call == 8 + 5 and engine is not None:  # the baseline's 8, then 5 runs of step 1
            engine.request("pause", "test pause")

    job_id, inputs = start(store, tmp_path / "paused", CountingTaskLM(pause_mid_step))
    engine = JobEngine(store, job_id, inputs=inputs)
    paused = run_job(store, job_id, engine=engine)
    assert paused.state == "paused"
    assert store.get_checkpoint(job_id).number == 0  # type: ignore[union-attr]
    assert len(paused.metadata[PREPAID]) >= 4  # the cut step's finished runs, stored

    inputs = JobInputs(lms={"task": CountingTaskLM(), "reflection": js.reflection_lm()})
    resumed = run_job(store, job_id, engine=JobEngine(store, job_id, inputs=inputs))
    assert resumed.state == "succeeded"
    assert (resumed.best_candidate_id, resumed.best_score, resumed.stop_reason) == (
        reference.best_candidate_id,
        reference.best_score,
        reference.stop_reason,
    )

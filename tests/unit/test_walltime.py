"""The wall-time budget against the pace measured on the seed's evaluation.

A job whose seed evaluation spends the whole wall-time budget says that the search never
ran (event, report, JSON result, the last line of ``emery train``); a plan that the budget
cannot hold at the measured pace gets a ``pace_warning``. The task model's calls take one
second each on a fake clock (``walltime_support``): nothing sleeps.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
import walltime_support as wt
from test_gepa_support import run_gepa, task_lm, word_problem_context, word_problems

from emery.algorithms.apo.plan import ApoPlanInputs, make_apo_plan
from emery.algorithms.apo.settings import ApoSettings
from emery.algorithms.baseline import BaselinePlanned
from emery.algorithms.gepa.plan import GepaPlanInputs, make_gepa_plan
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.mipro.events import MiproPlanned
from emery.algorithms.mipro.presets import PlanInputs, make_plan
from emery.algorithms.mipro.settings import MiproSettings
from emery.algorithms.pace import Pace, pace_warning
from emery.cli.app import main
from emery.config import parse_config
from emery.core.events import PaceWarning, PlanPayload, SearchNotRun
from emery.evaluation.budget import BudgetConfig
from emery.jobs import JobEngine, create_job, run_job, search_kind
from emery.reports.event_text import describe_event
from emery.reports.job_result import JobResult
from emery.reports.report import render_report
from emery.store import MemoryStore
from emery.store.records import JobRecord

NEVER_RAN = "the search never ran: the wall-time budget was spent on the seed's evaluation"

TRAIN = """
[job]
algorithm = "random_search"
seed = 1
budget = { wall_time_s = 5 }

[dataset]
task = "word_problems"
n_train = 6
n_val = 8
n_test = 4

[lm.task]
model = "python/walltime_support:task_lm"

[lm.reflection]
model = "python/jobs_support:reflection_lm"

[verifier]
kind = "numeric"
"""


@pytest.fixture(autouse=True)
def _fresh_clock() -> Iterator[None]:
    wt.CLOCK.now = 0.0
    yield
    wt.CLOCK.now = 0.0


def clocked_config(tmp_path: Path, budget: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """``jobs_support``'s word-problems job (8 val examples) with the clocked task model."""
    config = js.search_config(tmp_path / ".emery", budget=budget, **kwargs)
    config["lm"]["task"]["model"] = "python/walltime_support:task_lm"
    return config


def run_clocked(tmp_path: Path, config: dict[str, Any]) -> tuple[MemoryStore, JobRecord]:
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id
    job = run_job(store, job_id, engine=JobEngine(store, job_id, clock=wt.CLOCK))
    assert job.state == "succeeded", job.error
    return store, job


# --- the seed spends the whole budget ----------------------------------------------------


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_seed_that_spends_the_wall_time_says_the_search_never_ran(tmp_path: Path) -> None:
    # the seed's 8 val rollouts take 8 s of the 5 s budget
    store, job = run_clocked(tmp_path, clocked_config(tmp_path, {"wall_time_s": 5}))

    assert job.stop_reason == "wall_time_s: 8 of 5 used"
    [event] = store.list_events(job.id, kinds=[SearchNotRun.kind])
    assert event.data == {
        "limit": "wall_time_s",
        "reason": "wall_time_s: 8 of 5 used",
        "first_step": False,
    }
    assert describe_event(event).startswith(f"warning: {NEVER_RAN} (wall_time_s: 8 of 5 used)")
    assert not store.list_events(job.id, kinds=["iteration_completed"])

    result = JobResult.model_validate(job.result)
    assert any(w.startswith(NEVER_RAN) for w in result.warnings)  # the JSON result
    report = render_report(result)
    assert f"warning: {NEVER_RAN}" in report
    assert f"warning: {NEVER_RAN}" in Path(result.files["report"]).read_text()


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_search_that_ran_has_no_such_warning(tmp_path: Path) -> None:
    store, job = run_clocked(tmp_path, clocked_config(tmp_path, {"wall_time_s": 12}))

    assert (job.stop_reason or "").startswith("wall_time_s")
    assert store.list_events(job.id, kinds=["iteration_completed"])
    assert not store.list_events(job.id, kinds=[SearchNotRun.kind])
    assert not any("never ran" in w for w in JobResult.model_validate(job.result).warnings)


@pytest.mark.usefixtures("random_search_algorithm")
def test_train_ends_with_the_line_that_the_search_never_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    monkeypatch.setattr(search_kind, "JobEngine", functools.partial(JobEngine, clock=wt.CLOCK))
    (tmp_path / "job.toml").write_text(TRAIN)

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "job.toml"])

    assert exit_info.value.code in (0, None)
    captured = capsys.readouterr()
    last = [line for line in captured.err.splitlines() if line.strip()][-1]
    assert "succeeded, but " + NEVER_RAN in last
    assert f"warning: {NEVER_RAN}" in " ".join(captured.out.split())  # the report (wrapped)


# --- the plan against the measured pace ----------------------------------------------------


def gepa_plan(max_iterations: int = 15) -> PlanPayload:
    inputs = GepaPlanInputs(
        algorithm="gepa",
        n_train=12,
        n_val=10,
        components=1,
        budget_metric_calls=100,
        operators=False,
    )
    return make_gepa_plan(GepaSettings(minibatch_size=3, max_iterations=max_iterations), inputs)


def test_pace_warning_counts_the_gepa_iterations_the_time_left_holds() -> None:
    plan = gepa_plan()  # 13 iterations of 6 metric calls after the seed's 10 (12 unspent)
    pace = Pace(seconds=10.0, metric_calls=10)  # 1 s per call

    short = pace_warning(plan, pace, wall_time_s=40, used_s=10)

    assert isinstance(short, PaceWarning)
    assert (short.planned_trials, short.planned_calls, short.trials_held) == (13, 78, 5)
    assert short.message().startswith(
        "the wall-time budget of 40 s holds about 5 of the 13 planned iterations at the"
        " measured pace of 1 s per metric call"
    )
    assert pace_warning(plan, pace, wall_time_s=100, used_s=10) is None  # 90 s left: enough
    assert pace_warning(plan, Pace(10.0, 0), wall_time_s=40, used_s=10) is None  # no pace


def test_pace_warning_reads_every_algorithms_plan() -> None:
    pace = Pace(seconds=20.0, metric_calls=10)  # 2 s per call
    apo = make_apo_plan(
        ApoSettings(rounds=3),
        ApoPlanInputs(n_train=12, n_val=10, budget_metric_calls=None, operators=False),
    )
    mipro_plan = make_plan(
        MiproSettings(num_trials=10, minibatch_size=5),
        PlanInputs(
            stages=1,
            n_train=12,
            n_val=10,
            labeled_examples=0,
            fixed_instructions=1,
            budget_metric_calls=None,
        ),
    )
    mipro = MiproPlanned(**mipro_plan.model_dump(mode="json"), summary=mipro_plan.describe())
    baseline = BaselinePlanned(
        summary="",
        metric_calls={"baseline": 10, "candidates": 30, "total": 40},
        val_size=10,
        candidates=3,
    )
    for plan, unit in ((apo, "rounds"), (mipro, "trials"), (baseline, "candidates")):
        trials = plan.planned_trials()
        assert trials
        calls = plan.metric_calls["total"] - plan.metric_calls["baseline"]
        fits = pace_warning(plan, pace, wall_time_s=20 + 2 * calls, used_s=20)
        assert fits is None, unit
        short = pace_warning(plan, pace, wall_time_s=20 + calls, used_s=20)
        assert isinstance(short, PaceWarning), unit
        assert short.unit == unit
        assert short.planned_trials == trials
        assert short.trials_held < trials
    assert mipro.setup_calls() == mipro.metric_calls["bootstrap"]


async def test_gepa_warns_after_the_seed_when_the_time_cannot_hold_its_plan() -> None:
    dataset = word_problems(n_train=12, n_val=10)
    for wall_time_s, warned in ((25.0, True), (40.0, False)):
        wt.CLOCK.now = 0.0
        ctx = word_problem_context(
            dataset,
            budget=BudgetConfig(wall_time_s=wall_time_s, metric_calls=100),
            task=wt.ClockedLM(task_lm(dataset), wt.CLOCK),
        )
        ctx.budget.clock = wt.CLOCK
        _, records = await run_gepa(ctx, {"minibatch_size": 3, "max_iterations": 3})
        start = records[0].events
        kinds = [e.kind for e in start]
        assert "gepa.plan" in kinds
        assert ("pace_warning" in kinds) is warned, wall_time_s
        if warned:
            [short] = [e.payload() for e in start if e.kind == "pace_warning"]
            assert isinstance(short, PaceWarning)
            # seed: 10 calls in 10 s; 3 iterations of 6 calls need 18 s, 15 s are left
            assert (short.seconds_per_call, short.left_s, short.trials_held) == (1.0, 15.0, 2)


def test_a_baseline_job_warns_when_its_candidates_do_not_fit(tmp_path: Path) -> None:
    candidates = [{"solve": f"Variant {i}."} for i in range(3)]
    for wall_time_s, warned in ((20, True), (40, False)):
        wt.CLOCK.now = 0.0
        config = clocked_config(
            tmp_path / str(wall_time_s),
            {"wall_time_s": wall_time_s},
            algorithm="baseline",
            settings={"candidates": candidates},
        )
        store, job = run_clocked(tmp_path, config)
        warnings = store.list_events(job.id, kinds=[PaceWarning.kind])
        assert bool(warnings) is warned, wall_time_s
        result = JobResult.model_validate(job.result)
        if warned:  # the seed took 8 s; the 3 candidates need 24 s, 12 s are left
            [short] = warnings
            assert short.data["trials_held"] == 1
            assert any(
                w.startswith(
                    "the wall-time budget of 20 s holds about 1 of the 3 planned candidates"
                )
                for w in result.warnings
            )
        else:
            assert not result.warnings

"""A budget holds over a job's whole life, and a search that has ended stays ended.

The end of the search (its stop reason, and the budget and LM usage as it left them, the
time and calls of a step the budget cut included) is stored before the final test
scoring: a job paused during that scoring resumes into the scoring only, with the same
winner and no more steps. The seconds a step had run when a pause undid it count against
the wall time after the resume. The task model's calls take one second each on a fake
clock (``walltime_support``); nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
import walltime_support as wt

from emery.config import parse_config
from emery.config.resolve import JobInputs
from emery.core.models import ChatMessage
from emery.jobs import JobEngine, create_job, run_job
from emery.jobs.search_end import ENDED, WALL_TIME
from emery.lm import Completion
from emery.reports.job_result import JobResult
from emery.store import MemoryStore
from emery.store.records import EvaluationFilter
from emery.store.sql import SqlStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

TEST_NOTE = "on the test split"


@pytest.fixture(autouse=True)
def _fresh_clock() -> Iterator[None]:
    wt.CLOCK.now = 0.0
    yield
    wt.CLOCK.now = 0.0


def config(tmp_path: Path, budget: dict[str, Any]) -> dict[str, Any]:
    """The word-problems job, its task model's calls a second each on ``wt.CLOCK``."""
    data = js.search_config(tmp_path / ".emery", iterations=40, budget=budget, concurrency=1)
    data["lm"]["task"]["model"] = "python/walltime_support:task_lm"
    return data


def new_job(store: SqlStore, tmp_path: Path, data: dict[str, Any]) -> str:
    return create_job(store, parse_config(data), given=data, base_dir=tmp_path).id


def search_rows(store: SqlStore, job_id: str) -> list[tuple[Any, ...]]:
    """The job's stored train and val evaluations (what its search ran)."""
    page = store.list_evaluations(EvaluationFilter(job_id=job_id), limit=None)
    return sorted(
        (r.result.candidate_id, r.result.split, r.result.example_id)
        for r in page.items
        if r.result.split != "test"
    )


def pause_on_test_scoring(engine: JobEngine) -> Callable[[str], None]:
    """An ``on_note`` that pauses the job when its test scoring begins (Ctrl-C there)."""

    def note(text: str) -> None:
        if TEST_NOTE in text:
            engine.request("pause", "Ctrl-C")

    return note


BUDGETS = {
    "wall_time": {"wall_time_s": 30},  # the seed 8 s, then 6 s a step (14 with val)
    "lm_tokens": {"lm_tokens": 600},
}


@pytest.mark.parametrize("limit", sorted(BUDGETS))
def test_a_job_paused_in_its_test_scoring_resumes_into_the_scoring_only(
    tmp_path: Path, limit: str
) -> None:
    other = MemoryStore()
    reference_id = new_job(other, tmp_path / "ref", config(tmp_path / "ref", BUDGETS[limit]))
    reference = run_job(other, reference_id, engine=JobEngine(other, reference_id, clock=wt.CLOCK))
    assert reference.state == "succeeded", reference.error
    assert (reference.stop_reason or "").startswith(f"{limit}"), reference.stop_reason
    expected = JobResult.model_validate(reference.result)

    wt.CLOCK.now = 0.0
    store = MemoryStore()
    job_id = new_job(store, tmp_path / "paused", config(tmp_path / "paused", BUDGETS[limit]))
    engine = JobEngine(store, job_id, clock=wt.CLOCK)
    engine.on_note = pause_on_test_scoring(engine)
    paused = run_job(store, job_id, engine=engine)

    assert paused.state == "paused"
    assert paused.metadata[ENDED] == reference.stop_reason  # recorded before the scoring
    checkpoint = store.get_checkpoint(job_id)
    assert checkpoint is not None
    # the cut step's time and LM usage are in the store, though its work was undone
    assert checkpoint.budget == expected.budget.model_dump(mode="json")
    assert checkpoint.usage == {
        role: usage.model_dump(mode="json") for role, usage in expected.search_usage.items()
    }
    searched = search_rows(store, job_id)
    steps = len(store.list_events(job_id, kinds=["iteration_completed"]))

    resumed = run_job(store, job_id, engine=JobEngine(store, job_id, clock=wt.CLOCK))

    assert resumed.state == "succeeded", resumed.error
    assert search_rows(store, job_id) == searched  # no search step ran after the resume
    assert len(store.list_events(job_id, kinds=["iteration_completed"])) == steps
    result = JobResult.model_validate(resumed.result)
    assert resumed.stop_reason == reference.stop_reason
    assert result.best_candidate == expected.best_candidate
    assert (result.best_val, result.best_test) == (expected.best_val, expected.best_test)
    assert result.budget == expected.budget
    assert result.warnings == expected.warnings
    assert search_rows(store, job_id) == search_rows(other, reference_id)


class PausingTaskLM:
    """``walltime_support``'s task model (a second a call on ``wt.CLOCK``); after call
    ``pause_at`` it asks ``engine`` to pause."""

    model = "fake/hash-task"

    def __init__(self, pause_at: int | None = None) -> None:
        self.inner = wt.task_lm()
        self.calls = 0
        self.pause_at = pause_at
        self.engine: JobEngine | None = None

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        completion = await self.inner.complete(messages, **params)
        self.calls += 1
        if self.calls == self.pause_at and self.engine is not None:
            self.engine.request("pause", "test pause")
        return completion


def test_the_seconds_of_a_step_a_pause_undid_count_after_the_resume(tmp_path: Path) -> None:
    """Without them the resumed job has that much more time, and searches on past where
    an unpaused job stops."""
    data = config(tmp_path, {"wall_time_s": 36})
    data["runtime"]["cache"] = False

    def start(store: SqlStore, folder: Path, lm: PausingTaskLM) -> tuple[str, JobInputs]:
        inputs = JobInputs(lms={"task": lm, "reflection": js.reflection_lm()})
        return create_job(store, parse_config(data), base_dir=folder, inputs=inputs).id, inputs

    other = MemoryStore()
    job_id, inputs = start(other, tmp_path / "ref", PausingTaskLM())
    reference = run_job(
        other, job_id, engine=JobEngine(other, job_id, inputs=inputs, clock=wt.CLOCK)
    )
    assert (reference.stop_reason or "").startswith("wall_time_s"), reference.stop_reason
    expected = JobResult.model_validate(reference.result)

    wt.CLOCK.now = 0.0
    store = MemoryStore()
    first = PausingTaskLM(pause_at=8 + 5)  # the seed's 8, then 5 runs of step 1
    job_id, inputs = start(store, tmp_path / "paused", first)
    first.engine = JobEngine(store, job_id, inputs=inputs, clock=wt.CLOCK)
    paused = run_job(store, job_id, engine=first.engine)
    assert paused.state == "paused"
    checkpoint = store.get_checkpoint(job_id)
    assert checkpoint is not None
    assert paused.metadata[WALL_TIME] > checkpoint.budget["wall_time_s"]  # the undone step's

    inputs = JobInputs(lms={"task": PausingTaskLM(), "reflection": js.reflection_lm()})
    engine = JobEngine(store, job_id, inputs=inputs, clock=wt.CLOCK)
    resumed = run_job(store, job_id, engine=engine)

    assert resumed.state == "succeeded", resumed.error
    result = JobResult.model_validate(resumed.result)
    done = ("metric_calls", "proposals", "iterations")
    assert {k: getattr(result.budget, k) for k in done} == {
        k: getattr(expected.budget, k) for k in done
    }
    assert result.budget.wall_time_s >= expected.budget.wall_time_s
    assert resumed.stop_reason == reference.stop_reason
    assert resumed.best_candidate_id == reference.best_candidate_id

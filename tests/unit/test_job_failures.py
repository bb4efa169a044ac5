"""A job whose rollouts fail for errors, not answers, stops as failed at once with one line
naming the cause; a dataset without gold outputs is refused before any model call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.config.resolve import JobInputs
from emery.core.errors import DataError
from emery.core.example_result import ExampleResult, FailureKind
from emery.core.models import Candidate, ChatMessage, Lineage
from emery.evaluation.health import ErrorPolicy, ErrorWatch, RolloutErrors
from emery.jobs import JobEngine, create_job, run_job
from emery.lm import Completion
from emery.store import MemoryStore
from emery.verifiers.function import FunctionMetric

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

VAL = 8


class OutageLM:
    """Answers like ``jobs_support.task_lm`` for ``working`` calls, then always raises."""

    model = "fake/outage"

    def __init__(self, working: int) -> None:
        self.working = working
        self.inner = js.task_lm()
        self.calls = 0

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.calls += 1
        if self.calls > self.working:
            raise ConnectionError("the model server went away")
        return await self.inner.complete(messages, **params)


def run(tmp_path: Path, inputs: JobInputs | None = None, **changes: Any) -> tuple[MemoryStore, Any]:
    config = js.search_config(tmp_path / ".emery", iterations=6, budget={"metric_calls": 80})
    for section, values in changes.items():
        config[section] = {**config.get(section, {}), **values}
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), base_dir=tmp_path, inputs=inputs).id
    job = run_job(store, job_id, engine=JobEngine(store, job_id, inputs=inputs))
    return store, job


def spent(store: MemoryStore, job_id: str) -> int:
    checkpoint = store.get_checkpoint(job_id)
    return 0 if checkpoint is None else int(checkpoint.budget["metric_calls"])


def test_a_task_model_that_always_raises_fails_the_job_at_the_seed(tmp_path: Path) -> None:
    lm = OutageLM(working=0)
    store, job = run(tmp_path, JobInputs(lms={"task": lm, "reflection": js.reflection_lm()}))
    assert job.state == "failed"
    assert job.error.startswith(f"{VAL} of {VAL} rollouts of the seed on val failed with errors")
    assert "task model error: 8" in job.error
    assert "ConnectionError: the model server went away" in job.error
    assert "\n" not in job.error
    assert lm.calls == VAL  # not the whole budget
    assert store.get_checkpoint(job.id) is None


def test_an_unreachable_model_endpoint_fails_the_job_before_the_seed(tmp_path: Path) -> None:
    unreachable = {"model": "openai/m", "base_url": "http://127.0.0.1:9/v1", "max_attempts": 1}
    store, job = run(tmp_path, lm={"task": unreachable})
    assert job.state == "failed"
    assert job.error.startswith("lm.task: openai/m: cannot reach http://127.0.0.1:9/v1")
    assert store.get_checkpoint(job.id) is None


def test_a_verifier_that_raises_on_every_example_fails_the_job(tmp_path: Path) -> None:
    def broken(example: Any, output: Any) -> float:
        raise KeyError("score")

    inputs = JobInputs(verifier=FunctionMetric(broken))
    _, job = run(tmp_path, inputs)
    assert job.state == "failed"
    assert "(verifier error: 8); e.g. example" in job.error
    assert "KeyError: 'score'" in job.error


def test_a_model_that_goes_down_mid_search_stops_the_job(tmp_path: Path) -> None:
    lm = OutageLM(working=VAL + 3)  # the baseline and one minibatch work
    inputs = JobInputs(lms={"task": lm, "reflection": js.reflection_lm()})
    store, job = run(tmp_path, inputs)
    assert job.state == "failed"
    assert "right after those of candidate" in job.error
    assert "(runtime.max_error_rate is 50%)" in job.error
    assert spent(store, job.id) < 80


def test_the_error_rate_check_can_be_turned_off(tmp_path: Path) -> None:
    lm = OutageLM(working=VAL + 3)
    inputs = JobInputs(lms={"task": lm, "reflection": js.reflection_lm()})
    _, job = run(tmp_path, inputs, runtime={"max_error_rate": 1.0})
    assert job.state == "succeeded"


def test_a_dataset_without_gold_outputs_is_refused_before_any_call(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"What is {i} plus {i}?"} for i in range(6)]
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in rows))
    config = {
        "dataset": {"path": str(data)},
        "system": {
            "kind": "prompt_program",
            "stages": [{"name": "solve", "messages": [{"template": "{question}"}]}],
        },
        "lm": {"task": {"model": "python/jobs_support:task_lm"}},
        "runtime": {"workdir": str(tmp_path / ".emery")},
    }
    store = MemoryStore()
    with pytest.raises(DataError, match="no example of the dataset has an expected value"):
        create_job(store, parse_config(config), base_dir=tmp_path)
    assert store.list_jobs().items == []
    config["verifier"] = {"kind": "python", "function": "verifier_funcs:starts_with_expected"}
    create_job(store, parse_config(config), base_dir=tmp_path)  # a python verifier decides


def results(kinds: Sequence[FailureKind | None]) -> list[ExampleResult]:
    return [
        ExampleResult(
            candidate_id="c",
            example_id=f"e{i}",
            error=None if kind is None else f"{kind} broke",
            failure=kind,
        )
        for i, kind in enumerate(kinds)
    ]


def candidate(text: str, operation: str = "mutate") -> Candidate:
    return Candidate(components={"solve": text}, lineage=Lineage(operation=operation))


def test_one_broken_candidate_is_a_weak_candidate_and_two_in_a_row_a_broken_job() -> None:
    watch = ErrorWatch(ErrorPolicy())
    broken = results(["model", "model", "timeout", None])
    watch.check(candidate("a"), "train", broken, broken)  # its prompt may be the cause
    watch.check(candidate("a"), "val", broken, broken)  # the same candidate again
    healthy = results([None, "output", "error", None])  # answers and its own exceptions
    watch.check(candidate("b"), "train", healthy, healthy)
    watch.check(candidate("c"), "train", broken, broken)
    pattern = r"rollouts of candidate \w+ on train failed .* right after those of"
    with pytest.raises(RolloutErrors, match=pattern):
        watch.check(candidate("d"), "train", broken, broken)


def test_the_seed_fails_the_job_when_its_runs_fail_for_errors_not_answers() -> None:
    watch = ErrorWatch(ErrorPolicy(min_rollouts=10))
    seed = candidate("s", operation="seed")
    unparseable = results(["output", "output", "model"])
    watch.check(seed, "val", unparseable, unparseable)  # wrong answers: a weak seed
    crashed = results(["error", "error"])
    with pytest.raises(RolloutErrors, match="2 of 2 rollouts of the seed on val"):
        watch.check(seed, "val", crashed, [])  # stored results count too

"""With the response cache off, a pause stores the finished runs of the step it cuts short,
and the resumed job takes them instead of paying for their model calls again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.config.resolve import JobInputs
from emery.core.models import ChatMessage
from emery.jobs import JobEngine, create_job, run_job
from emery.jobs.prepaid import PREPAID
from emery.lm import Completion
from emery.store import MemoryStore
from emery.store.records import JobRecord

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


class CountingTaskLM:
    """``jobs_support.task_lm`` counting calls; ``after_call(n)`` runs after call ``n``."""

    model = "fake/hash-task"

    def __init__(self, after_call: Callable[[int], None] | None = None) -> None:
        self.inner = js.task_lm()
        self.calls = 0
        self.after_call = after_call

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        completion = await self.inner.complete(messages, **params)
        self.calls += 1
        if self.after_call is not None:
            self.after_call(self.calls)
        return completion


def config(tmp_path: Path) -> dict[str, Any]:
    data = js.search_config(tmp_path / ".emery", iterations=4, concurrency=1)
    data["runtime"]["cache"] = False
    return data


def job(store: MemoryStore, tmp_path: Path, lm: CountingTaskLM) -> tuple[str, JobInputs]:
    inputs = JobInputs(lms={"task": lm, "reflection": js.reflection_lm()})
    parsed = parse_config(config(tmp_path))
    return create_job(store, parsed, base_dir=tmp_path, inputs=inputs).id, inputs


def run(store: MemoryStore, job_id: str, engine: JobEngine) -> JobRecord:
    return run_job(store, job_id, engine=engine)


def test_a_pause_mid_step_pays_no_finished_call_twice(tmp_path: Path) -> None:
    reference_lm = CountingTaskLM()
    other = MemoryStore()
    job_id, inputs = job(other, tmp_path / "ref", reference_lm)
    reference = run(other, job_id, JobEngine(other, job_id, inputs=inputs))

    store = MemoryStore()
    engine: JobEngine | None = None

    def pause_mid_step(call: int) -> None:
        if call == 8 + 5 and engine is not None:  # the baseline's 8, then 5 runs of step 1
            engine.request("pause", "test pause")

    first = CountingTaskLM(pause_mid_step)
    job_id, inputs = job(store, tmp_path / "paused", first)
    engine = JobEngine(store, job_id, inputs=inputs)
    paused = run(store, job_id, engine)
    assert paused.state == "paused"
    assert store.get_checkpoint(job_id).number == 0  # type: ignore[union-attr]
    assert len(paused.metadata[PREPAID]) >= 4  # the step's finished runs, stored
    assert store.count_evaluations(job_id) >= 8 + 4

    second = CountingTaskLM()
    inputs = JobInputs(lms={"task": second, "reflection": js.reflection_lm()})
    resumed = run(store, job_id, JobEngine(store, job_id, inputs=inputs))
    assert resumed.state == "succeeded"
    assert PREPAID not in resumed.metadata
    assert (resumed.best_candidate_id, resumed.best_score) == (
        reference.best_candidate_id,
        reference.best_score,
    )
    spent, expected = (
        {k: v for k, v in s.get_checkpoint(j).budget.items() if k != "wall_time_s"}  # type: ignore[union-attr]
        for s, j in ((store, job_id), (other, reference.id))
    )
    assert spent == expected  # charged as if never paused
    usage, expected_usage = ((j.result or {})["usage"]["task"] for j in (resumed, reference))
    tokens = ("calls", "prompt_tokens", "completion_tokens")
    # the prepaid runs' model usage is counted again (a token budget spends as if never paused)
    assert {k: usage[k] for k in tokens} == {k: expected_usage[k] for k in tokens}
    # only the run in flight when the pause came (cancelled, its reply unused) is paid twice
    assert first.calls + second.calls - reference_lm.calls <= 1

"""An executor named by ``[runtime] executor = "module:attr"`` runs a job's batches; a bad
name (the reliability corpus's ``cases_executor``) is refused in one line before the job
is stored."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jobs_support as js
import pytest
import runners_support as rs
from bad_input_support import one_error_line, run_cli, store_jobs
from cases import Case
from cases_executor import executor_cases

from emery.core.models import Candidate, Example, Split
from emery.evaluation.executor import Done, LocalExecutor, RolloutHost
from emery.jobs import run_job
from emery.store import MemoryStore
from emery.workers.executors import ExecutorKind, ExecutorSetup


class CountingExecutor(LocalExecutor):
    """Runs rollouts here, counting them."""

    rollouts = 0

    async def run(
        self,
        host: RolloutHost,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        done: Done,
    ) -> None:
        CountingExecutor.rollouts += len(examples)
        await super().run(host, candidate, examples, split, done)


def counting(setup: ExecutorSetup) -> CountingExecutor:
    return CountingExecutor()


COUNTING = ExecutorKind(counting, elsewhere=False)


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_module_attr_executor_runs_the_jobs_rollouts(tmp_path: Path) -> None:
    config = js.search_config(tmp_path / ".emery", iterations=2)
    config["runtime"]["executor"] = "test_executor_plugins:COUNTING"
    store = MemoryStore()
    CountingExecutor.rollouts = 0

    job = run_job(store, rs.new_job(store, tmp_path, config))

    assert job.state == "succeeded", job.error
    assert CountingExecutor.rollouts == store.count_evaluations(job.id) > 0


@pytest.mark.parametrize("case", executor_cases(), ids=lambda case: case.name)
def test_a_bad_executor_name_is_refused_in_one_line_before_the_job_is_stored(
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, text in case.files.items():
        (tmp_path / name).write_text(str(text))
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "emery.db"

    code = run_cli([*case.args, "--store", str(store)])

    assert code != 0
    assert case.expect.lower() in one_error_line(capsys.readouterr().err).lower()
    assert not store.exists() or store_jobs(store) == []

"""``[references.NAME]``: hand-written candidates scored on test beside the seed and the best."""

from __future__ import annotations

from pathlib import Path

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.jobs import create_job, run_job
from emery.reports import JobResult
from emery.reports.report import render_report
from emery.store import MemoryStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def config(tmp_path: Path, references: dict[str, dict[str, str]]) -> dict[str, object]:
    base = js.search_config(tmp_path / ".emery", iterations=2)
    base["lm"] = {"task": {"model": "python/jobs_support:careful_task_lm"}}
    return base | {"references": references}


def test_references_are_scored_on_test_and_reported(tmp_path: Path) -> None:
    store = MemoryStore()
    given = config(
        tmp_path,
        {"expert": {"solve": "Solve it carefully."}, "reminded": {"solve:reminder": "Units!"}},
    )
    job = create_job(store, parse_config(given), given=given, base_dir=tmp_path)

    done = run_job(store, job.id)

    assert done.state == "succeeded"
    result = JobResult.model_validate(done.result)
    expert = result.references_test["expert"]
    assert (expert.mean, expert.n) == (1.0, 4)  # careful_task_lm: right under "carefully"
    assert result.baseline_test is not None
    assert result.baseline_test.mean == 0.0
    stored = [c for c in store.job_candidates(job.id) if c.lineage.operation == "reference"]
    assert sorted(c.components.get("solve:reminder", "") for c in stored) == ["", "Units!"]
    assert "reference 'expert' on test: 100.0%" in render_report(result)


def test_a_reference_naming_an_unknown_component_is_refused(tmp_path: Path) -> None:
    given = config(tmp_path, {"expert": {"answer": "x"}})
    store = MemoryStore()
    with pytest.raises(
        ConfigError,
        match=r"references.expert: unknown component 'answer' \(the system has: solve\)",
    ):
        create_job(store, parse_config(given), given=given, base_dir=tmp_path)
    assert store.list_jobs().total == 0


def test_a_reference_with_a_placeholder_no_input_has_is_refused(tmp_path: Path) -> None:
    given = config(tmp_path, {"expert": {"solve:reminder": "Labels: {labels}"}})
    with pytest.raises(
        ConfigError, match=r"references.expert: stage 'solve': placeholder \{labels\}"
    ):
        create_job(MemoryStore(), parse_config(given), given=given, base_dir=tmp_path)

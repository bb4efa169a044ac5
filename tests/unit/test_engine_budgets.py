"""Each budget ends a job as succeeded with the limit recorded as the stop reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.core.events import Event
from emery.jobs import JobEngine, create_job, run_job
from emery.lm.usage import RoleUsage
from emery.store import MemoryStore
from emery.store.records import JobRecord
from emery.store.sql import SqlStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def run(
    tmp_path: Path,
    budget: dict[str, Any],
    *,
    engine_hook: Any = None,
    lm: dict[str, Any] | None = None,
) -> tuple[SqlStore, JobRecord]:
    config = js.search_config(tmp_path / ".emery", iterations=40, budget=budget)
    if lm:
        config["lm"]["task"].update(lm)
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id
    engine = JobEngine(store, job_id)
    if engine_hook is not None:
        engine.on_event = lambda events: engine_hook(events, tmp_path)
    job = run_job(store, job_id, engine=engine)
    assert job.state == "succeeded", job.error
    return store, job


def spent(store: SqlStore, job: JobRecord) -> dict[str, Any]:
    checkpoint = store.get_checkpoint(job.id)
    assert checkpoint is not None
    return checkpoint.budget


def test_metric_calls(tmp_path: Path) -> None:
    store, job = run(tmp_path, {"metric_calls": 40})
    assert (job.stop_reason or "").startswith("metric_calls")
    assert spent(store, job)["metric_calls"] <= 40
    warnings = store.list_events(job.id, kinds=["budget_warning"])
    assert [w.data["resource"] for w in warnings] == ["metric_calls"]
    assert warnings[0].data["used"] >= 0.8 * 40


def test_lm_tokens(tmp_path: Path) -> None:
    store, job = run(tmp_path, {"lm_tokens": 600})
    assert (job.stop_reason or "").startswith("lm_tokens")
    result = job.result or {}
    usage = [RoleUsage.model_validate(u) for u in result["search_usage"].values()]
    used = sum(u.budget_tokens for u in usage)
    assert job.stop_reason == f"lm_tokens: {used} of 600 used"  # the search's, not the tests'
    [line] = store.list_events(job.id, kinds=["budget_planned"])
    assert line.data["summary"].startswith("budget: 600 LM tokens over task, reflection,")
    report = Path(result["files"]["report"]).read_text()
    assert f"  LM tokens {used} of 600 in the search, all roles together (" in report


def test_lm_cost(tmp_path: Path) -> None:
    _store, job = run(tmp_path, {"lm_cost_usd": 0.01}, lm={"price_input_per_mtok": 50.0})
    assert (job.stop_reason or "").startswith("lm_cost_usd")
    assert (job.result or {})["usage"]["task"]["cost_usd"] >= 0.01


def test_wall_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "0.02")
    store, job = run(tmp_path, {"wall_time_s": 0.3})
    assert (job.stop_reason or "").startswith("wall_time_s")
    # the step the time ran out in is cut, not stored: the result counts its time
    assert (job.result or {})["budget"]["wall_time_s"] >= 0.3
    assert spent(store, job)["wall_time_s"] <= (job.result or {})["budget"]["wall_time_s"]


def test_candidate_proposals(tmp_path: Path) -> None:
    store, job = run(tmp_path, {"max_proposals": 3})
    assert (job.stop_reason or "").startswith("max_proposals")
    proposed = store.list_events(job.id, kinds=["candidate_proposed"])
    assert len(proposed) == 3
    assert len(store.job_candidates(job.id)) == 4  # the seed and three proposals


def test_no_improvement(tmp_path: Path) -> None:
    store, job = run(tmp_path, {"no_improvement_iterations": 2})
    assert (job.stop_reason or "").startswith("no_improvement")
    iterations = store.list_events(job.id, kinds=["iteration_completed"])
    best = [job.baseline_score] + [e.data["best_score"] for e in iterations]
    assert best[-1] == best[-2] == best[-3]  # two iterations without a better score


def test_stop_file(tmp_path: Path) -> None:
    def touch_after_two(events: list[Event], folder: Path) -> None:
        if any(e.kind == "checkpoint_saved" and e.data["iteration"] == 2 for e in events):
            (folder / "STOP").write_text("")

    store, job = run(tmp_path, {"stop_file": "STOP"}, engine_hook=touch_after_two)
    assert job.stop_reason == f"stop_file: {tmp_path / 'STOP'} exists"
    assert store.get_checkpoint(job.id).number == 2  # type: ignore[union-attr]

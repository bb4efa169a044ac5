"""The job engine in one process: the event sequence, checkpoints, the evaluation cache,
pause, resume and cancel, failures and the result it writes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.config.evaluation_scope import evaluation_scope
from emery.config.resolve import resolve_dataset, resolve_system, resolve_verifier
from emery.core.errors import ConfigError
from emery.core.events import Event
from emery.jobs import JobBusy, JobEngine, create_job, run_job
from emery.jobs.ownership import owner_id
from emery.reports import JobResult
from emery.store import IllegalTransition, MemoryStore, SQLiteStore
from emery.store.sql import SqlStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def new_job(store: SqlStore, tmp_path: Path, **options: Any) -> str:
    config = js.search_config(tmp_path / ".emery", **options)
    return create_job(store, parse_config(config), given=config, base_dir=tmp_path).id


def kinds(store: SqlStore, job_id: str) -> list[str]:
    return [e.kind for e in store.list_events(job_id)]


def comparable(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in events]


def test_a_search_job_runs_to_success_with_a_complete_event_log(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path, iterations=5)
    seen: list[Event] = []
    notes: list[str] = []
    engine = JobEngine(store, job_id, on_event=seen.extend, on_note=notes.append)
    job = run_job(store, job_id, engine=engine)
    assert job.state == "succeeded"
    assert job.stop_reason == "iterations done"
    assert [note.split(" candidate")[0] for note in notes] == [
        "scoring the seed",
        "scoring the best",
    ]
    assert notes[1].endswith("on the test split (4 examples)")
    events = store.list_events(job_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.seq for e in seen] == [e.seq for e in events[1:]]  # all but 'created'
    names = [e.kind for e in events]
    assert names[:8] == [
        "created",
        "queued",
        "started",
        "budget_planned",
        "candidate_evaluated",
        "baseline_evaluated",
        "best_updated",
        "checkpoint_saved",
    ]
    assert names[-1] == "succeeded"
    checkpoints = [e.data["iteration"] for e in events if e.kind == "checkpoint_saved"]
    assert checkpoints == [0, 1, 2, 3, 4, 5]
    iterations = [i for i, name in enumerate(names) if name == "iteration_completed"]
    assert all(names[i + 1] == "checkpoint_saved" for i in iterations)
    tests = [
        e.data for e in events if e.kind == "candidate_evaluated" and e.data["split"] == "test"
    ]
    assert {t["n"] for t in tests} == {4}
    # the best candidate is the one with the best full val score
    val_scores = {
        e.data["candidate_id"]: e.data["score"]
        for e in events
        if e.kind == "candidate_evaluated" and e.data["split"] == "val" and e.data["n"] == 8
    }
    assert job.best_score == max(val_scores.values())
    assert val_scores[job.best_candidate_id] == job.best_score
    assert job.baseline_score is not None
    assert job.best_score > job.baseline_score


def test_the_result_and_report_are_written_next_to_the_config(tmp_path: Path) -> None:
    store = MemoryStore()
    job = run_job(store, new_job(store, tmp_path, iterations=4))
    result = JobResult.model_validate(job.result)
    assert Path(result.files["json"]).parent == tmp_path / "results"
    on_disk = JobResult.model_validate_json(Path(result.files["json"]).read_text())
    assert on_disk == result
    assert result.best_candidate is not None
    assert result.best_candidate.id == job.best_candidate_id
    assert result.baseline_test is not None
    assert result.best_test is not None
    assert result.lift_split == "test"
    assert result.lift_abs == pytest.approx(result.best_test.mean - result.baseline_test.mean)
    assert result.top_candidates[0].score == job.best_score
    assert result.usage["task"].calls > 0
    assert "reflection" in result.usage
    assert result.budget.metric_calls == store.get_checkpoint(job.id).budget["metric_calls"]  # type: ignore[union-attr]
    report = Path(result.files["report"]).read_text()
    for text in result.best_candidate.components.values():
        assert text in report
    assert "lift on test" in report
    assert "LM usage" in report
    assert "reflection" in report


def test_every_stored_evaluation_is_paid_once_and_counted_once(tmp_path: Path) -> None:
    store = MemoryStore()
    job = run_job(store, new_job(store, tmp_path, iterations=6))
    checkpoint = store.get_checkpoint(job.id)
    assert checkpoint is not None
    searched = [e for e in store.list_evaluations(limit=None).items if e.result.split != "test"]
    assert checkpoint.budget["metric_calls"] == len(searched)
    new_rollouts = sum(
        e.data["new_rollouts"]
        for e in store.list_events(job.id, kinds=["candidate_evaluated"])
        if e.data["split"] != "test"
    )
    assert new_rollouts == len(searched)


def test_a_second_job_reuses_the_stored_evaluations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore()
    first = run_job(store, new_job(store, tmp_path / "a", iterations=4))
    calls = tmp_path / "calls.log"
    monkeypatch.setenv(js.CALL_LOG_ENV, str(calls))
    second = run_job(store, new_job(store, tmp_path / "b", iterations=4))  # fresh LM cache
    assert second.state == "succeeded"
    assert (second.best_candidate_id, second.best_score) == (
        first.best_candidate_id,
        first.best_score,
    )
    reused = store.list_events(second.id, kinds=["candidate_evaluated"])
    assert reused
    assert all(e.data["new_rollouts"] == 0 for e in reused)
    assert store.get_checkpoint(second.id).budget["metric_calls"] == 0  # type: ignore[union-attr]
    assert store.count_evaluations(second.id) == 0
    task_calls = [line for line in calls.read_text().splitlines() if line.startswith("task")]
    assert task_calls == []


def test_an_example_whose_content_changed_is_run_again(tmp_path: Path) -> None:
    rows = [
        {"id": f"q{i}", "question": f"What is {i} plus {i}?", "expected": 2 * i, "split": split}
        for i, split in enumerate(["val"] * 4 + ["test"] * 2)
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    config = {
        "job": {"algorithm": "baseline"},
        "dataset": {"path": str(data)},
        "system": {
            "kind": "prompt_program",
            "stages": [{"name": "solve", "messages": [{"template": "{question}"}]}],
        },
        "lm": {"task": {"model": "python/jobs_support:task_lm"}},
        "runtime": {"workdir": str(tmp_path / ".emery")},
    }
    store = MemoryStore()
    run_job(store, create_job(store, parse_config(config), base_dir=tmp_path).id)
    rows[1]["question"] = "What is 100 plus 100?"
    rows[1]["expected"] = 200
    data.write_text("\n".join(json.dumps(r) for r in rows))
    second = run_job(store, create_job(store, parse_config(config), base_dir=tmp_path).id)
    [baseline] = [
        e.data
        for e in store.list_events(second.id, kinds=["candidate_evaluated"])
        if e.data["split"] == "val"
    ]
    assert baseline["new_rollouts"] == 1


def test_the_evaluation_scope_follows_what_changes_outputs(tmp_path: Path) -> None:
    def scope(section: str = "", key: str = "", value: Any = None) -> str:
        data = js.search_config(tmp_path)
        if section:
            target = data["lm"]["task"] if section == "task" else data[section]
            target[key] = value
        config = parse_config(data)
        dataset = resolve_dataset(config, tmp_path)
        return evaluation_scope(
            config, resolve_system(config), resolve_verifier(config, dataset), dataset=dataset
        )

    same = scope()
    assert scope() == same
    assert scope("task", "temperature", 0.7) != same
    assert scope("task", "max_tokens", 64) != same
    assert scope("task", "model", "python/jobs_support:reflection_lm") != same
    assert scope("verifier", "kind", "exact") != same
    assert scope("runtime", "concurrency", 1) == same  # does not change outputs
    assert scope("job", "seed", 5) == same


def test_pausing_and_resuming_gives_the_uninterrupted_result(tmp_path: Path) -> None:
    other = MemoryStore()
    reference = run_job(other, new_job(other, tmp_path / "ref", iterations=6))
    store = MemoryStore()
    job_id = new_job(store, tmp_path / "paused", iterations=6)
    engine = JobEngine(store, job_id)

    def pause_after_two(events: list[Event]) -> None:
        if any(e.kind == "checkpoint_saved" and e.data["iteration"] == 2 for e in events):
            engine.request("pause", "test pause")

    engine.on_event = pause_after_two
    paused = run_job(store, job_id, engine=engine)
    assert paused.state == "paused"
    assert paused.stop_reason == "test pause"
    assert store.get_checkpoint(job_id).number == 2  # type: ignore[union-attr]
    assert kinds(store, job_id)[-2:] == ["checkpoint_saved", "paused"]
    resumed = run_job(store, job_id)
    assert resumed.state == "succeeded"
    assert (resumed.best_candidate_id, resumed.best_score, resumed.baseline_score) == (
        reference.best_candidate_id,
        reference.best_score,
        reference.baseline_score,
    )
    events = store.list_events(job_id)
    marker = next(i for i, e in enumerate(events) if e.kind == "resumed")
    ref_events = other.list_events(reference.id)
    ref_cut = next(
        i
        for i, e in enumerate(ref_events)
        if e.kind == "checkpoint_saved" and e.data["iteration"] == 2
    )
    assert comparable(events[marker + 1 :]) == comparable(ref_events[ref_cut + 1 :])
    assert resumed.result["best_test"] == reference.result["best_test"]  # type: ignore[index]


def test_cancelling_keeps_everything_stored(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path, iterations=6)
    engine = JobEngine(store, job_id)

    def cancel_after_one(events: list[Event]) -> None:
        if any(e.kind == "checkpoint_saved" and e.data["iteration"] == 1 for e in events):
            engine.request("cancel", "not needed")

    engine.on_event = cancel_after_one
    job = run_job(store, job_id, engine=engine)
    assert job.state == "cancelled"
    assert kinds(store, job_id)[-1] == "cancelled"
    assert len(store.job_candidates(job_id)) == 2
    assert store.count_evaluations(job_id) > 0
    with pytest.raises(IllegalTransition, match="already cancelled"):
        run_job(store, job_id)


def test_a_bug_in_the_algorithm_fails_the_job_and_keeps_its_data(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path, settings={"iterations": 6, "fail_at": 2})
    job = run_job(store, job_id)
    assert job.state == "failed"
    assert job.error == "RuntimeError: the proposer returned nonsense"
    last = store.list_events(job_id)[-1]
    assert (last.kind, last.data["reason"]) == ("failed", job.error)
    assert store.get_checkpoint(job_id).number == 2  # type: ignore[union-attr]


def test_a_new_best_the_algorithm_does_not_report_fails_the_job(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path, settings={"iterations": 8, "report_best": False})
    job = run_job(store, job_id)
    assert job.state == "failed"
    assert job.error is not None
    assert job.error.startswith("AlgorithmContractError: algorithm 'random_search' made ")
    assert job.error.endswith("the best candidate without emitting best_updated for it")
    assert "\n" not in job.error
    checkpoint = store.get_checkpoint(job_id)
    assert checkpoint is not None
    assert checkpoint.number < 8  # the step that broke the rule was not stored
    best = [e.data["candidate_id"] for e in store.list_events(job_id, kinds=["best_updated"])]
    assert best == [checkpoint.state["seed_candidate_id"]]  # the baseline, reported by start


def test_a_config_that_cannot_run_fails_a_new_job(tmp_path: Path) -> None:
    config = js.search_config(tmp_path)
    config["lm"]["task"]["model"] = "python/jobs_support:no_such_model"
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), base_dir=tmp_path).id
    with pytest.raises(ConfigError, match="no_such_model"):
        run_job(store, job_id)
    job = store.get_job(job_id)
    assert job.state == "failed"
    assert "no_such_model" in (job.error or "")


def test_a_budget_too_small_for_the_baseline_fails_the_job(tmp_path: Path) -> None:
    store = MemoryStore()
    job = run_job(store, new_job(store, tmp_path, budget={"metric_calls": 3}))
    assert job.state == "failed"
    assert "budget exhausted before the baseline" in (job.error or "")


def test_a_job_run_by_a_live_process_is_not_started_twice(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path)
    store.transition(job_id, "queued")
    store.transition(job_id, "running", fields={"owner": owner_id(), "heartbeat_at": time.time()})
    with pytest.raises(JobBusy, match="is running in process"):
        run_job(store, job_id)


def test_a_job_left_running_by_a_dead_process_is_recovered(tmp_path: Path) -> None:
    other = MemoryStore()
    reference = run_job(other, new_job(other, tmp_path / "ref", iterations=4))
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = new_job(store, tmp_path / "crash", iterations=4)
    store.transition(job_id, "queued")
    store.transition(
        job_id, "running", fields={"owner": "elsewhere:1", "heartbeat_at": time.time() - 3600}
    )
    job = run_job(store, job_id)
    assert job.state == "succeeded"
    resumed = store.list_events(job_id, kinds=["resumed"])
    assert "recovered" in resumed[0].data["reason"]
    assert (job.best_candidate_id, job.best_score) == (
        reference.best_candidate_id,
        reference.best_score,
    )


def test_an_engine_that_lost_its_job_stops_writing(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path, iterations=20)
    engine = JobEngine(store, job_id, poll_s=0.02)

    def steal(events: list[Event]) -> None:
        if any(e.kind == "checkpoint_saved" and e.data["iteration"] == 1 for e in events):
            store.update_job(job_id, owner="thief:1")
            time.sleep(0.2)  # the watcher notices within its poll interval

    engine.on_event = steal
    job = run_job(store, job_id, engine=engine)
    assert (job.state, job.owner) == ("running", "thief:1")
    assert store.get_checkpoint(job_id).number == 1  # type: ignore[union-attr]


def test_the_baseline_algorithm_is_an_eval_job(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path, algorithm="baseline")
    assert store.get_job(job_id).kind == "eval"
    job = run_job(store, job_id)
    assert job.state == "succeeded"
    assert job.best_candidate_id == store.job_candidates(job_id)[0].id


def test_a_succeeded_job_result_says_when_it_finished(tmp_path: Path) -> None:
    store = MemoryStore()
    job = run_job(store, new_job(store, tmp_path, iterations=2))
    assert job.finished_at is not None
    result = JobResult.model_validate(job.result)
    on_disk = json.loads(Path(result.files["json"]).read_text())
    assert on_disk["finished_at"] is not None
    assert result.finished_at == job.finished_at

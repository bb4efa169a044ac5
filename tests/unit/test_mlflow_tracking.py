"""``[tracking] mlflow = true``: a scripted GEPA job logged as an MLflow run on a local
file store (``mlruns`` in tmp_path): its config as parameters, its scores and budget use
as metrics in step order, the best candidate and the reports as artifacts, and a paused
job resumed into the same run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from test_gepa_support import reflection_lm, task_lm, word_problems

import emery
from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.core.events import Event
from emery.data.tasks import builtin_task
from emery.integrations.mlflow_run import tracking_uri
from emery.integrations.tracking import RUN_ID_KEY
from emery.jobs import create_job, run_job
from emery.jobs.engine import JobEngine
from emery.store import MemoryStore
from emery.systems.prompt_program import PromptProgram

mlflow_tracking = pytest.importorskip("mlflow.tracking")


def tracked_config(folder: Path) -> dict[str, Any]:
    """A GEPA job whose reflected instructions solve every question the seed fails."""
    config = js.search_config(
        folder / ".emery",
        algorithm="gepa",
        budget={"metric_calls": 80},
        settings={"max_iterations": 6, "use_merge": False, "stop_when_perfect": False},
    )
    config["lm"]["task"]["model"] = "python/jobs_support:careful_task_lm"
    config["tracking"] = {"mlflow": True, "tracking_uri": "mlruns", "experiment": "emery-test"}
    return config


def new_job(store: MemoryStore, folder: Path) -> str:
    config = tracked_config(folder)
    return create_job(store, parse_config(config), given=config, base_dir=folder).id


def client(folder: Path) -> Any:
    return mlflow_tracking.MlflowClient(tracking_uri=(folder / "mlruns").as_uri())


def history(mlflow: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    """A metric's (step, value) points in the order they were logged."""
    return [(m.step, m.value) for m in mlflow.get_metric_history(run_id, key)]


def val_scores(store: MemoryStore, job_id: str) -> list[float]:
    return [
        e.data["score"]
        for e in store.list_events(job_id, kinds=["candidate_evaluated"])
        if e.data["split"] == "val"
    ]


def artifacts(mlflow: Any, run_id: str, path: str | None = None) -> set[str]:
    return {item.path for item in mlflow.list_artifacts(run_id, path)}


def test_a_job_is_a_run_with_params_metrics_in_step_order_and_artifacts(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path)

    job = run_job(store, job_id)

    assert job.state == "succeeded"
    assert job.best_score == 1.0
    assert job.baseline_score == 0.0
    mlflow = client(tmp_path)
    run = mlflow.get_run(job.metadata[RUN_ID_KEY])
    assert run.info.status == "FINISHED"
    assert run.info.run_name == job.name
    assert mlflow.get_experiment(run.info.experiment_id).name == "emery-test"
    assert run.data.tags["emery.job_id"] == job_id
    params = run.data.params
    assert params["job.algorithm"] == "gepa"
    assert params["job.budget.metric_calls"] == "80"
    assert params["algorithm.gepa.max_iterations"] == "6"
    assert params["lm.task.model"] == "python/jobs_support:careful_task_lm"
    run_id = run.info.run_id
    val = history(mlflow, run_id, "val_score")
    assert [score for _, score in val] == val_scores(store, job_id)
    steps = [step for step, _ in val]
    assert steps == sorted(steps)
    assert steps[0] == 8  # the seed on the 8 val examples
    assert history(mlflow, run_id, "baseline_val_score") == [(8, 0.0)]
    assert history(mlflow, run_id, "best_val_score")[-1][1] == 1.0
    assert history(mlflow, run_id, "minibatch_score")
    calls = history(mlflow, run_id, "metric_calls")
    assert [step for step, _ in calls] == list(range(1, len(calls) + 1))  # one per iteration
    assert calls[-1][1] == store.get_checkpoint(job_id).budget["metric_calls"]  # type: ignore[union-attr]
    assert history(mlflow, run_id, "lm_tokens")
    assert run.data.metrics["best_test_score"] > run.data.metrics["baseline_test_score"]
    assert artifacts(mlflow, run_id) == {"best_candidate", "reports", "config.json"}
    assert artifacts(mlflow, run_id, "reports") == {
        f"reports/{Path(path).name}" for path in job.result["files"].values()
    } | {f"reports/{job_id}.html"}
    best = job.result["best_candidate"]["components"]
    local = Path(mlflow.download_artifacts(run_id, "best_candidate", str(tmp_path / "got")))
    assert {p.name for p in local.iterdir()} == {"candidate.json", *(f"{n}.txt" for n in best)}
    assert (local / "solve.txt").read_text() == best["solve"]
    assert "carefully" in best["solve"]


def test_a_paused_job_resumes_into_the_same_run(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path)

    def pause_after_two(events: list[Event]) -> None:
        if any(e.kind == "checkpoint_saved" and e.data["iteration"] == 2 for e in events):
            engine.request("pause", "test pause")

    engine = JobEngine(store, job_id, on_event=pause_after_two)
    paused = run_job(store, job_id, engine=engine)
    assert paused.state == "paused"
    run_id = paused.metadata[RUN_ID_KEY]
    mlflow = client(tmp_path)
    assert mlflow.get_run(run_id).info.status == "SCHEDULED"
    assert mlflow.get_run(run_id).data.tags["emery.state"] == "paused"
    before = {key: history(mlflow, run_id, key) for key in ("minibatch_score", "metric_calls")}
    assert len(before["metric_calls"]) == 2

    resumed = run_job(store, job_id)

    assert resumed.state == "succeeded"
    assert resumed.metadata[RUN_ID_KEY] == run_id
    experiment = mlflow.get_experiment_by_name("emery-test")
    assert [r.info.run_id for r in mlflow.search_runs([experiment.experiment_id])] == [run_id]
    run = mlflow.get_run(run_id)
    assert run.info.status == "FINISHED"
    for key, earlier in before.items():
        points = history(mlflow, run_id, key)
        assert points[: len(earlier)] == earlier
        assert len(points) > len(earlier)
        steps = [step for step, _ in points]
        assert steps == sorted(steps)  # the resumed job goes on from the calls spent before
    calls = history(mlflow, run_id, "metric_calls")
    assert [step for step, _ in calls] == list(range(1, len(calls) + 1))
    assert [score for _, score in history(mlflow, run_id, "val_score")] == val_scores(store, job_id)
    assert "best_candidate" in artifacts(mlflow, run_id)


def test_tracking_without_mlflow_is_a_one_line_error_at_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    config = tracked_config(tmp_path)
    store = MemoryStore()

    with pytest.raises(ConfigError) as caught:
        create_job(store, parse_config(config), given=config, base_dir=tmp_path)

    message = str(caught.value)
    assert "\n" not in message
    assert "emery[mlflow]" in message
    assert store.list_jobs().items == []


def test_tracking_uris_a_folder_is_a_file_uri_relative_to_the_config(tmp_path: Path) -> None:
    assert tracking_uri("mlruns", tmp_path) == (tmp_path / "mlruns").as_uri()
    assert tracking_uri("file://runs", tmp_path) == (tmp_path / "runs").as_uri()
    assert tracking_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    assert tracking_uri("sqlite:///m.db", tmp_path) == "sqlite:///m.db"
    assert tracking_uri(None, tmp_path) is None


def test_optimize_takes_the_tracking_settings(tmp_path: Path) -> None:
    data = word_problems(n_train=6, n_val=4, n_test=4)
    store = MemoryStore()

    result = emery.optimize(
        PromptProgram(builtin_task("word_problems").program),
        data,
        algorithm="gepa",
        budget=30,
        verifier="numeric",
        lm=task_lm(data),
        reflection_lm=reflection_lm(),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
        progress=False,
        tracking={"mlflow": True, "tracking_uri": str(tmp_path / "mlruns")},
    )

    run = client(tmp_path).get_run(store.get_job(result.job_id).metadata[RUN_ID_KEY])
    assert run.info.status == "FINISHED"
    assert run.data.params["job.budget.metric_calls"] == "30"
    assert run.data.metrics["best_val_score"] == result.best_val

"""``[tracking] tracking_uri`` pointing at a tracking server: ``mlflow server`` (from
mlflow-skinny with flask, on 127.0.0.1, a temp SQLite backend) gets a scripted GEPA job,
paused and resumed, as one run with its metrics and artifacts uploaded over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_mlflow_tracking import artifacts, history, tracked_config, val_scores

from emery.config import parse_config
from emery.core.events import Event
from emery.integrations.tracking import RUN_ID_KEY
from emery.jobs import create_job, run_job
from emery.jobs.engine import JobEngine
from emery.store import MemoryStore

mlflow_tracking = pytest.importorskip("mlflow.tracking")
pytest.importorskip("flask_cors", reason="mlflow server needs flask and flask-cors (dev extra)")

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination", str(folder / "artifacts"),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    log = (folder / "server.log").open("w")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start: {(folder / 'server.log').read_text()}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the server and the workers it started
        process.wait(timeout=30)
        log.close()


def test_a_paused_and_resumed_job_is_one_run_on_a_tracking_server(
    server: str, tmp_path: Path
) -> None:
    store = MemoryStore()
    config = tracked_config(tmp_path)
    config["tracking"]["tracking_uri"] = server
    job_id = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id

    def pause_after_two(events: list[Event]) -> None:
        if any(e.kind == "checkpoint_saved" and e.data["iteration"] == 2 for e in events):
            engine.request("pause", "test pause")

    engine = JobEngine(store, job_id, on_event=pause_after_two)
    assert run_job(store, job_id, engine=engine).state == "paused"
    job = run_job(store, job_id)

    assert job.state == "succeeded"
    mlflow = mlflow_tracking.MlflowClient(tracking_uri=server)
    run_id = job.metadata[RUN_ID_KEY]
    experiment = mlflow.get_experiment_by_name("emery-test")
    assert [r.info.run_id for r in mlflow.search_runs([experiment.experiment_id])] == [run_id]
    run = mlflow.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["job.algorithm"] == "gepa"
    val = history(mlflow, run_id, "val_score")
    assert [score for _, score in val] == val_scores(store, job_id)
    calls = history(mlflow, run_id, "metric_calls")
    assert [step for step, _ in calls] == list(range(1, len(calls) + 1))
    assert artifacts(mlflow, run_id) == {"best_candidate", "reports", "config.json"}
    assert f"reports/{job_id}.html" in artifacts(mlflow, run_id, "reports")


def test_an_unreachable_tracking_server_is_a_warning_not_a_failed_job(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    store = MemoryStore()
    config = tracked_config(tmp_path)
    config["tracking"]["tracking_uri"] = f"http://127.0.0.1:{_free_port()}"  # nobody there
    job_id = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id

    job = run_job(store, job_id)

    assert job.state == "succeeded"
    assert RUN_ID_KEY not in job.metadata
    assert f"job {job_id}: not tracked in MLflow" in caplog.text

"""``emery train CONFIG --server URL`` and ``emery.Job.create(..., server=URL)``: the job
is made and run by a running server, its events followed back; the same command again
finds the same job; a server that cannot be reached, or refuses the key, is one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jobs_support as js
import pytest
from bad_input_support import one_error_line, run_cli
from server_support import random_search_module

import emery
from emery.core.errors import EmeryError
from emery.proxy import BackgroundServer, free_port
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore

__all__ = ["random_search_module"]
pytestmark = pytest.mark.usefixtures("random_search_module")
KEY = "team-key-1"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, MemoryStore]]:
    store = MemoryStore()
    app = create_server_app(
        store, api_key=KEY, launcher=ThreadLauncher(), base_dir=tmp_path, allow_code=True
    )
    monkeypatch.setenv("EMERY_API_KEY", KEY)
    with BackgroundServer(app) as served:
        yield served.url, store


def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(js.search_config(tmp_path / ".emery", iterations=2)))
    return path


def test_a_job_runs_on_the_server_and_its_progress_comes_back(
    server: tuple[str, MemoryStore], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, store = server
    config = config_file(tmp_path)
    assert run_cli(["train", str(config), "--server", url]) == 0
    shown = capsys.readouterr()
    (job,) = store.list_jobs().items
    assert store.get_job(job.id).state == "succeeded"
    assert f"created job {job.id} on {url}" in shown.err
    assert "iteration 1 done" in shown.err  # the job's events, followed over SSE
    assert "seed" in shown.out  # the report
    assert run_cli(["train", str(config), "--server", url, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["job_id"], again["state"]) == (job.id, "succeeded")
    assert store.list_jobs().total == 1  # the same command finds the same job
    assert run_cli(["train", str(config), "--server", url, "--new", "--no-poll"]) == 0
    assert store.list_jobs().total == 2


def test_a_server_that_is_not_there_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert run_cli(["train", str(config_file(tmp_path)), "--server", url]) != 0
    line = one_error_line(capsys.readouterr().err)
    assert f"cannot reach the emery server at {url}" in line


def test_a_refused_key_is_one_line(
    server: tuple[str, MemoryStore],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, store = server
    monkeypatch.setenv("EMERY_API_KEY", "wrong")
    assert run_cli(["train", str(config_file(tmp_path)), "--server", url]) != 0
    assert "the server refused the API key" in one_error_line(capsys.readouterr().err)
    assert store.list_jobs().total == 0


def test_the_sdk_makes_and_follows_a_job_on_the_server(
    server: tuple[str, MemoryStore], tmp_path: Path
) -> None:
    url, store = server
    job = emery.Job.create(config_file(tmp_path), server=url, name="from-python")
    assert isinstance(job, emery.RemoteJob)
    kinds: list[str] = []
    record = job.stream_until_complete(lambda item: kinds.append(item.kind))
    assert record["state"] == "succeeded"
    assert store.get_job(job.id).name == "from-python"
    assert "iteration_completed" in kinds
    result = job.result()
    assert isinstance(result, emery.JobResult)
    assert result.best_val is not None
    with pytest.raises(EmeryError, match=r"takes a config only, not verifier"):
        emery.Job.create(config_file(tmp_path), server=url, verifier=lambda e, o: 1.0)  # type: ignore[call-overload]


def test_jobs_commands_steer_and_watch_a_job_on_the_server(
    server: tuple[str, MemoryStore],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, store = server
    monkeypatch.setenv(js.DELAY_ENV, "0.02")  # slow enough to pause mid-run
    monkeypatch.setenv("EMERY_SERVER", url)  # every jobs command below goes to the server
    config = tmp_path / "slow.json"
    config.write_text(json.dumps(js.search_config(tmp_path / ".emery", iterations=40)))
    assert run_cli(["train", str(config), "--no-poll"]) == 0
    job_id = capsys.readouterr().out.strip()
    js.wait_until(lambda: store.get_job(job_id).state == "running", timeout=30)
    assert run_cli(["jobs", "pause", job_id]) == 0
    assert capsys.readouterr().out.strip() == f"job {job_id} paused"
    assert store.get_job(job_id).state == "paused"
    assert run_cli(["jobs", "events", job_id, "--json"]) == 0
    kinds = [json.loads(line)["kind"] for line in capsys.readouterr().out.splitlines()]
    assert kinds[-1] == "paused"
    monkeypatch.setenv(js.DELAY_ENV, "0")
    assert run_cli(["jobs", "resume", job_id, "--stream-format", "none"]) == 0
    assert store.get_job(job_id).state == "succeeded"
    assert run_cli(["jobs", "cancel", job_id]) != 0  # a finished job cannot be cancelled
    assert "409" in one_error_line(capsys.readouterr().err)
    assert run_cli(["jobs", "list"]) == 0
    listed = capsys.readouterr()
    assert job_id in listed.out
    assert "succeeded" in listed.out
    assert "1-1 of 1 jobs" in listed.err
    assert run_cli(["jobs", "show", job_id]) == 0
    shown = capsys.readouterr().out
    assert "succeeded" in shown
    assert "metric calls" in shown
    assert run_cli(["jobs", "show", job_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == job_id

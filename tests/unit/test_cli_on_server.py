"""``emery candidates`` and ``emery report`` with ``--server URL`` read the job from a
running server's API and print what they print for the store it serves; ``emery eval``
runs here and refuses ``--server`` in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bad_input_support import one_error_line, run_cli
from fastapi.testclient import TestClient
from server_support import finished_job, job_config, random_search_module

from emery.config import parse_config
from emery.core.errors import EmeryError
from emery.jobs import create_job
from emery.proxy import BackgroundServer
from emery.sdk.server_client import ServerClient
from emery.server.api import create_server_app
from emery.store import SQLiteStore

__all__ = ["random_search_module"]
ADMIN, READ = "admin-key", "read-key"


@dataclass
class Served:
    url: str
    store_path: str
    finished: str
    created: str
    store: SQLiteStore


@pytest.fixture(scope="module")
def served(
    random_search_module: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """A finished job and one not yet run in a SQLite file, served with a read key."""
    workdir = tmp_path_factory.mktemp("on-server")
    path = workdir / "emery.db"
    store = SQLiteStore(path)
    finished = finished_job(store, workdir)  # type: ignore[arg-type]
    config = job_config(workdir, iterations=1)
    created = create_job(store, parse_config(config), given=config, base_dir=workdir).id
    app = create_server_app(SQLiteStore(path), api_key=ADMIN, read_key=READ, base_dir=workdir)
    with BackgroundServer(app) as server:
        yield Served(server.url, str(path), finished, created, store)
    store.close()


@pytest.fixture(autouse=True)
def read_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI sends the server's read key: enough for everything here."""
    monkeypatch.setenv("EMERY_API_KEY", READ)
    monkeypatch.delenv("EMERY_SERVER", raising=False)


def both(args: list[str], served: Served, capsys: pytest.CaptureFixture[str]) -> str:
    """``emery ARGS`` on the store, then on the server: the same output (returned)."""
    assert run_cli([*args, "--store", served.store_path]) == 0
    local = capsys.readouterr().out
    assert run_cli([*args, "--server", served.url]) == 0
    remote = capsys.readouterr().out
    assert remote == local
    return remote


def test_candidates_on_the_server_print_the_stores_table(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    job = served.finished
    best = served.store.get_job(job).best_candidate_id
    assert best is not None
    table = both(["candidates", job], served, capsys)
    assert f"{best} *" in table
    assert "candidates; * = the job's best" in table
    both(["candidates", job, "--top", "2", "--sort", "ordinal", "--split", "test"], served, capsys)
    listed = json.loads(both(["candidates", job, "--json", "--top", "50"], served, capsys))
    assert listed["total"] == len(listed["candidates"]) > 2
    assert "seed" in both(["candidates", job, "--tree"], served, capsys)
    both(["candidates", job, "--tree", "--json", "--split", "train"], served, capsys)


def test_one_candidate_on_the_server_is_shown_as_from_the_store(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    job = served.finished
    records = served.store.list_candidates(job, sort="ordinal").items
    child = next(record for record in records if record.candidate.lineage.parents)
    shown = both(["candidates", job, "--show", child.id[:8]], served, capsys)
    assert "diff against the first parent" in shown
    assert "% on " in shown
    document = json.loads(both(["candidates", job, "--show", child.id, "--json"], served, capsys))
    assert document["id"] == child.id
    assert set(document["scores"]) == {"train", "val", "test"}


def test_the_report_on_the_server_is_the_stores_report(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    text = both(["report", served.finished], served, capsys)
    assert "seed" in text
    document = json.loads(both(["report", served.finished, "--json"], served, capsys))
    assert document["best_val"] is not None
    both(["report", served.created], served, capsys)  # not run yet: reported as it stands


def test_what_the_server_path_refuses_is_one_line(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli(["report", served.finished, "--html", "--server", served.url]) != 0
    line = one_error_line(capsys.readouterr().err)
    assert "--html is written where the job's store is" in line
    assert f"{served.url}/#/jobs/{served.finished}" in line
    bad_sort = ["candidates", served.finished, "--sort", "-score,bogus"]
    assert run_cli([*bad_sort, "--store", served.store_path]) != 0
    local = one_error_line(capsys.readouterr().err)
    assert run_cli([*bad_sort, "--server", served.url]) != 0
    assert one_error_line(capsys.readouterr().err) == local
    assert "cannot sort by 'bogus'" in local
    assert run_cli(["candidates", "no-such-job", "--server", served.url]) != 0
    assert "404" in one_error_line(capsys.readouterr().err)
    monkeypatch.setenv("EMERY_API_KEY", "wrong")
    assert run_cli(["report", served.finished, "--server", served.url]) != 0
    assert "the server refused the API key" in one_error_line(capsys.readouterr().err)


def test_eval_runs_here_and_refuses_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli(["eval", "--task", "word_problems", "--server", "http://h:8420"]) != 0
    line = one_error_line(capsys.readouterr().err)
    assert "emery eval runs here and takes no --server" in line
    assert "emery train CONFIG --server http://h:8420 --set job.algorithm=baseline" in line
    monkeypatch.setenv("EMERY_SERVER", "http://h:8420")  # for the jobs commands: eval ignores it
    assert run_cli(["eval", "--server", "http://h:8420", "--help"]) == 0
    assert "Not taken" in capsys.readouterr().out


def test_a_server_client_over_a_test_client_reads_the_same_records(served: Served) -> None:
    app = create_server_app(SQLiteStore(served.store_path), api_key=ADMIN, read_key=READ)
    with TestClient(app) as http, ServerClient("http://testserver", http=http) as client:
        page = client.candidate_scores(served.finished, split="val", sort="ordinal", limit=3)
        local = served.store.list_candidates(served.finished, sort="ordinal", limit=3)
        assert page["total"] == local.total
        assert page["candidates"] == [record.model_dump(mode="json") for record in local.items]
        assert client.result(served.created)["state"] == "created"
        with pytest.raises(EmeryError, match=r"does not let this key POST /api/jobs/.*/pause"):
            client.pause(served.finished)

"""CLI tables piped or captured (not a terminal) print whole ids, names and paths, however
narrow ``COLUMNS`` is."""

from __future__ import annotations

from pathlib import Path

import jobs_support as js
import pytest
from typer.testing import CliRunner

from emery.cli.app import app
from emery.config import parse_config
from emery.core.models import Candidate, Lineage
from emery.jobs import create_job
from emery.lm import catalog
from emery.store import SQLiteStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

NARROW = {"COLUMNS": "30", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
LONG_NAME = "a-job-name-far-too-long-for-thirty-columns"


def invoke(args: list[str]) -> str:
    """Run ``emery ARGS`` with stdout captured (not a terminal) in 30 columns."""
    result = CliRunner().invoke(app, args, env=NARROW)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def job_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A store holding one job with a long name and three candidates: (store path, job id)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    config = parse_config(js.search_config(tmp_path / "work", algorithm="baseline"), "test")
    job = create_job(store, config, name=LONG_NAME)
    seed = Candidate(components={"solve": "Solve it."})
    children = [
        seed.derive(
            components={"solve": f"Solve it, variant {i}."},
            lineage=Lineage(parents=(seed.id,), generation=1, operation="mutate"),
        )
        for i in range(2)
    ]
    store.add_candidates(job.id, [seed, *children])
    store.close()
    return str(path), job.id


def test_models_list_prints_whole_names_and_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path / "a-model-directory-with-a-long-name"))
    output = invoke(["models", "list"])
    for model in catalog.KNOWN_MODELS.values():
        assert f"local/{model.name}" in output
        assert str(catalog.status(model).path) in output
    assert "…" not in output


def test_jobs_list_prints_whole_ids_and_names(job_store: tuple[str, str]) -> None:
    location, job_id = job_store
    output = invoke(["jobs", "list", "--store", location])
    assert job_id in output
    assert LONG_NAME in output


def test_candidates_prints_whole_ids(job_store: tuple[str, str]) -> None:
    location, job_id = job_store
    output = invoke(["candidates", job_id, "--store", location])
    store = SQLiteStore(location)
    ids = [candidate.id for candidate in store.job_candidates(job_id)]
    store.close()
    assert len(ids) == 3
    for candidate_id in ids:
        assert candidate_id in output

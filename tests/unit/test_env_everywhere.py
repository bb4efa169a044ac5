"""``./.env`` is read by every ``emery`` command and by ``emery.optimize`` /
``emery.Job.create``; a variable already in the environment always wins."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from bad_input_support import run_cli

import emery
from emery.config import env_file
from emery.config.env_file import load_env_file
from emery.core.errors import ConfigError
from emery.core.models import Example
from emery.lm import FakeLM
from emery.store import MemoryStore, SQLiteStore

KEY = "EMERY_TEST_DOTENV_KEY"
OTHER = "EMERY_TEST_DOTENV_OTHER"


def keyed_lm() -> FakeLM:
    """A ``python/`` model that cannot be built without ``KEY`` (as an API key's)."""
    key = os.environ.get(KEY)
    if key != "from-dotenv":
        raise RuntimeError(f"{KEY} is {key!r}")
    return FakeLM(lambda messages: "a1", model="fake/keyed")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In ``tmp_path``, with the test's variables unset (and unset again afterwards)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(env_file, "_from_default", {})
    for name in (KEY, OTHER, "EMERY_STORE"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def job_config(folder: Path) -> dict[str, object]:
    (folder / "rows.jsonl").write_text(
        json.dumps({"id": "e1", "question": "q1", "expected": "a1", "split": "val"}) + "\n"
    )
    return {
        "job": {"algorithm": "baseline"},
        "dataset": {"path": str(folder / "rows.jsonl")},
        "system": {
            "kind": "prompt_program",
            "stages": [{"name": "solve", "messages": [{"template": "{question}"}]}],
        },
        "lm": {"task": {"model": "python/test_env_everywhere:keyed_lm"}},
        "runtime": {"workdir": str(folder / "work")},
    }


def test_jobs_resume_sees_what_only_dot_env_holds(tmp_path: Path) -> None:
    store_path = tmp_path / "jobs.db"
    os.environ[KEY] = "from-dotenv"  # only while the job is stored (the fixture unsets it)
    job = emery.Job.create(job_config(tmp_path), store=SQLiteStore(store_path), env_file=False)
    del os.environ[KEY]
    # EMERY_STORE finds the store, KEY lets the model be built: both only in ./.env
    (tmp_path / ".env").write_text(f"EMERY_STORE={store_path}\n{KEY}=from-dotenv\n")
    assert run_cli(["jobs", "resume", job.id[:6], "--stream-format", "none", "--quiet"]) == 0
    assert SQLiteStore(store_path).get_job(job.id).state == "succeeded"


def test_a_dot_env_value_never_overrides_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(OTHER, "from the shell")
    (tmp_path / ".env").write_text(f"{OTHER}=from-dotenv\n{KEY}=from-dotenv\n")
    assert run_cli(["jobs", "list", "--store", str(tmp_path / "jobs.db")]) == 0
    assert os.environ[OTHER] == "from the shell"
    assert os.environ[KEY] == "from-dotenv"


def test_an_explicit_file_replaces_dot_env_values_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(OTHER, "from the shell")
    (tmp_path / ".env").write_text(f"{OTHER}=dot\n{KEY}=dot\n")
    (tmp_path / "keys.env").write_text(f"{OTHER}=keys\n{KEY}=keys\n")
    assert load_env_file() == [KEY]
    assert load_env_file(Path("keys.env")) == [KEY]
    assert (os.environ[KEY], os.environ[OTHER]) == ("keys", "from the shell")
    with pytest.raises(ConfigError, match=r"^env_file= nothing\.env: file not found$"):
        load_env_file(Path("nothing.env"), option="env_file=")


def optimize(tmp_path: Path, **options: Any) -> None:
    emery.optimize(
        None,
        [Example(id="e1", input={"question": "q1"}, expected="a1")],
        algorithm="baseline",
        lm=FakeLM(lambda messages: "a1", model="fake/a1"),
        store=MemoryStore(),
        runtime={"workdir": str(tmp_path / "work")},
        progress=False,
        **options,
    )


def test_optimize_reads_dot_env_unless_told_not_to(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"{KEY}=from-dotenv\n")
    optimize(tmp_path, env_file=False)
    assert KEY not in os.environ
    optimize(tmp_path)
    assert os.environ[KEY] == "from-dotenv"
    (tmp_path / "keys.env").write_text(f"{OTHER}=from-keys\n{KEY}=from-keys\n")
    optimize(tmp_path, env_file="keys.env")
    assert (os.environ[OTHER], os.environ[KEY]) == ("from-keys", "from-keys")


def test_job_create_and_get_read_dot_env(tmp_path: Path) -> None:
    store = MemoryStore()
    (tmp_path / ".env").write_text(f"{KEY}=from-dotenv\n")
    job = emery.Job.create(job_config(tmp_path), store=store)  # keyed_lm needs KEY
    assert os.environ[KEY] == "from-dotenv"
    del os.environ[KEY]
    assert emery.Job.get(job.id, store=store).start(wait=True).status() == "succeeded"

"""A config file's folder is where its ``module:attr`` names and its harness ``code_path``
are found, wherever ``emery`` runs from (as its data paths already were)."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import pytest

from emery.config.loading import job_config, load_config
from emery.config.resolve import JobInputs, resolve_job, resolve_system
from emery.store.records import JobRecord
from emery.systems.function_agent import FunctionAgent
from emery.systems.harness.system import CodeHarness

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, with the process in another folder and sys.path restored after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "project"


def agent_project(folder: Path) -> str:
    module = f"agent_{uuid.uuid4().hex[:8]}"  # never imported before: no sys.modules hit
    folder.mkdir()
    (folder / f"{module}.py").write_text("def answer(question):\n    return question\n")
    (folder / "job.toml").write_text(
        f'[dataset]\ntask = "word_problems"\n\n[system]\nkind = "function_agent"\n'
        f'agent = "{module}:answer"\n'
    )
    return module


def test_a_config_names_a_module_beside_it(elsewhere: Path) -> None:
    agent_project(elsewhere)

    config = load_config(elsewhere / "job.toml")

    assert isinstance(resolve_system(config, base_dir=elsewhere), FunctionAgent)


def test_a_stored_job_finds_its_modules_in_its_base_dir(elsewhere: Path) -> None:
    module = agent_project(elsewhere)
    record = JobRecord.model_validate(
        {
            "id": "j-1",
            "name": "agent",
            "state": "created",
            "kind": "optimize",
            "algorithm": "gepa",
            "created_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z",
            "config": {
                "dataset": {"task": "word_problems"},
                "system": {"kind": "function_agent", "agent": f"{module}:answer"},
            },
            "base_dir": str(elsewhere),
        }
    )

    config = job_config(record)

    assert isinstance(resolve_system(config, base_dir=elsewhere), FunctionAgent)


def test_a_harness_reads_its_code_path_beside_the_config(elsewhere: Path) -> None:
    shutil.copytree(EXAMPLES / "harness_agent", elsewhere)
    (elsewhere / "loop.py").write_text(
        (elsewhere / "loop.py").read_text() + "\n# the copy beside the config\n"
    )

    config = load_config(elsewhere / "job.toml")
    system = resolve_system(config, base_dir=elsewhere)

    assert isinstance(system, CodeHarness)
    assert "# the copy beside the config" in system.seed_candidate().components["code:runtime"]


def test_a_job_resolves_its_harness_code_beside_the_config(elsewhere: Path) -> None:
    shutil.copytree(EXAMPLES / "harness_agent", elsewhere)
    (elsewhere / "loop.py").write_text((elsewhere / "loop.py").read_text() + "\n# beside\n")

    objects = resolve_job(load_config(elsewhere / "job.toml"), elsewhere, JobInputs()).checked()

    assert "# beside" in objects.system.seed_candidate().components["code:runtime"]

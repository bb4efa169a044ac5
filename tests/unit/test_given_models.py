"""Models given by role (``JobInputs.lms``, ``emery.optimize(lm=..., reflection_lm=...)``)
beside a config's ``[lm]`` sections (``config/resolve.py:build_models``): a given model runs
its role, a configured role without one runs its own section, and any other role is the
task's, the given task model or else the one ``[lm.task]`` names."""

from __future__ import annotations

from pathlib import Path

import jobs_support as js
import pytest

import emery
from emery.config import parse_config
from emery.config.resolve import build_models
from emery.config.schema import JobConfig
from emery.lm import FakeLM


def _config(tmp_path: Path, *, reflection: bool) -> JobConfig:
    config = js.search_config(tmp_path / ".emery")
    if not reflection:
        del config["lm"]["reflection"]
    return parse_config(config)


def _models(tmp_path: Path, given: dict[str, FakeLM] | None, reflection: bool) -> dict[str, str]:
    models = build_models(_config(tmp_path, reflection=reflection), base=given)
    return {role: lm.model for role, lm in models.by_role.items()}


def test_without_a_given_task_model_every_other_role_is_built_from_the_config(
    tmp_path: Path,
) -> None:
    given = {"reflection": FakeLM([], model="fake/given-reflection")}
    assert _models(tmp_path, given, reflection=False) == {
        "task": "fake/hash-task",
        "reflection": "fake/given-reflection",
        "proposer": "fake/hash-task",
        "judge": "fake/hash-task",
    }


def test_a_given_task_model_runs_the_roles_not_configured(tmp_path: Path) -> None:
    given = {"task": FakeLM([], model="fake/given-task")}
    assert _models(tmp_path, given, reflection=True) == {
        "task": "fake/given-task",
        "reflection": "fake/hash-reflection",
        "proposer": "fake/given-task",
        "judge": "fake/given-task",
    }


@pytest.mark.usefixtures("random_search_algorithm")
def test_optimize_runs_with_a_named_task_model_and_a_given_reflection_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = emery.optimize(
        None,
        "word_problems",
        algorithm="random_search",
        settings={"iterations": 2},
        budget=30,
        verifier="numeric",
        lm="python/jobs_support:task_lm",
        reflection_lm=js.reflection_lm(),
        store=":memory:",
        progress=False,
        runtime={"workdir": str(tmp_path / ".emery")},
    )
    assert result.state == "succeeded"

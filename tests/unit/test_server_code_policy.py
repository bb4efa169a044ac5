"""``emery server`` takes no posted config that would run code on its host (the user's
modules and functions, or code a model writes) unless started with ``--allow-code``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from emery.config import parse_config
from emery.config.code_settings import code_settings
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore

PLAIN: dict[str, Any] = {
    "dataset": {"task": "word_problems"},
    "lm": {"task": {"model": "openai/gpt-4.1-mini", "base_url": "http://127.0.0.1:9/v1"}},
    "verifier": {"kind": "numeric"},
}
GRAPH_WITH_CODE = {
    "kind": "graph",
    "nodes": [
        {
            "name": "solve",
            "kind": "llm",
            "instruction": "Solve it.",
            "messages": [{"role": "user", "template": "{question}"}],
        },
        {"name": "double", "kind": "code", "source": "def run(solve):\n    return solve * 2"},
        {"name": "out", "kind": "output", "value": "double"},
    ],
}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"lm": {"task": {"model": "python/mymodels:lm"}}}, 'lm.task.model = "python/mymodels:lm"'),
        ({"lm": {"task": {"model": "mymodels:P/echo"}}}, 'lm.task.model = "mymodels:P/echo"'),
        (
            {"verifier": {"kind": "rubric", "scoring": "test_judge_scoring_plugins:GRADE_LETTER"}},
            'verifier.scoring = "test_judge_scoring_plugins:GRADE_LETTER"',
        ),
        ({"verifier": {"kind": "python", "function": "m:f"}}, 'verifier.kind = "python"'),
        ({"verifier": {"kind": "code_tests"}}, 'verifier.kind = "code_tests"'),
        ({"job": {"algorithm": "mine:SPEC"}}, 'job.algorithm = "mine:SPEC"'),
        (
            {"algorithm": {"gepa": {"candidate_selection": "mine:NEWEST"}}},
            'algorithm.gepa.candidate_selection = "mine:NEWEST"',
        ),
        (
            {"algorithm": {"gepa": {"acceptance": "mine:RULE"}}},
            'algorithm.gepa.acceptance = "mine:RULE"',
        ),
        (
            {"algorithm": {"gepa": {"operator_turns": "mine:TURNS"}}},
            'algorithm.gepa.operator_turns = "mine:TURNS"',
        ),
        (
            {"algorithm": {"gepa": {"operators": ["answer_stage", "mine:OPERATOR"]}}},
            'algorithm.gepa.operators = "mine:OPERATOR"',
        ),
        (
            {"system": {"kind": "function_agent", "agent": "a:b"}},
            'system.kind = "function_agent"',
        ),
        ({"system": GRAPH_WITH_CODE}, "system: code nodes double"),
    ],
)
def test_each_way_a_config_brings_code_is_named(change: dict[str, Any], named: str) -> None:
    config = parse_config({**PLAIN, **change})
    (found,) = code_settings(config)
    assert found.startswith(named)


def test_a_plain_config_brings_none() -> None:
    assert code_settings(parse_config(PLAIN)) == []


def post(allow_code: bool, config: dict[str, Any], tmp_path: Path) -> Any:
    store = MemoryStore()
    app = create_server_app(
        store, launcher=ThreadLauncher(), base_dir=tmp_path, allow_code=allow_code
    )
    with TestClient(app) as client:
        answer = client.post("/api/jobs", json={"config": config, "start": False})
    return answer, store


def test_the_server_refuses_code_unless_allowed(tmp_path: Path) -> None:
    config = {**PLAIN, "lm": {"task": {"model": "python/jobs_support:task_lm"}}}
    refused, store = post(False, config, tmp_path)
    assert refused.status_code == 400
    assert refused.json()["detail"] == (
        'config: lm.task.model = "python/jobs_support:task_lm" (a Python object of yours) would'
        " run code on the server's host with its permissions; this server takes no such"
        " config (start it with --allow-code to allow that, or run the job with emery train)"
    )
    assert store.list_jobs().total == 0
    allowed, store = post(True, config, tmp_path)
    assert allowed.status_code == 201, allowed.text
    assert store.list_jobs().total == 1

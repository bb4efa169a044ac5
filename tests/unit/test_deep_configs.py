"""Configs nested thousands of levels deep (issue 50, item 1): one error line and exit 2
from every command that reads a config, a 400 from ``POST /api/jobs``, never a
RecursionError traceback. TOML arrays and inline tables recurse in the parser; table
headers and dotted keys do not, and used to reach the recursive copy of ``--set``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input_support import job_config, one_error_line, run_cli
from fastapi.testclient import TestClient

from emery.config.loading import read_config_data
from emery.core.errors import ConfigError
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore

DEEP = 5000
KEY = ".".join(["a"] * DEEP)
TEXTS = {
    "arrays": ("x = " + "[" * DEEP + "]" * DEEP + "\n", "nested too deeply"),
    "inline tables": ("x = " + "{x = " * DEEP + "1" + "}" * DEEP + "\n", "nested too deeply"),
    "table header": (f"[{KEY}]\nx = 1\n", "nested over 64 levels"),
    "dotted key": (f"{KEY} = 1\n", "nested over 64 levels"),
    "array of tables": (f"[[{KEY}]]\nx = 1\n", "nested over 64 levels"),
}


@pytest.mark.parametrize("name", TEXTS)
@pytest.mark.parametrize("command", ["train", "eval"])
def test_a_config_nested_5000_deep_is_one_line(
    name: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expect = TEXTS[name]
    path = tmp_path / "job.toml"
    path.write_text(job_config(tmp_path).read_text() + text)
    store = ["--store", "memory://"] if command == "train" else []
    assert run_cli([command, str(path), *store]) == 2
    assert expect in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("value", [TEXTS["arrays"][0][4:], TEXTS["inline tables"][0][4:]])
def test_a_set_value_nested_5000_deep_is_one_line(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = job_config(tmp_path)
    args = ["train", str(path), "--store", "memory://", "--set", f"algorithm.gepa.x={value}"]
    assert run_cli(args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--set algorithm.gepa.x: the value is nested too deeply" in line


def test_reading_checks_the_depth_before_anything_recurses(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"dataset": {"a": {"b": {"c": 1}}}}))
    assert read_config_data(path) == {"dataset": {"a": {"b": {"c": 1}}}}
    path = tmp_path / "job.toml"
    path.write_text(TEXTS["table header"][0])
    with pytest.raises(ConfigError, match=r"job.toml: a\.a\.a\.a\.a\.a\.… is nested over 64"):
        read_config_data(path)


@pytest.mark.parametrize("depth", [300, DEEP])
def test_the_server_answers_400_to_a_config_nested_deep(depth: int, tmp_path: Path) -> None:
    app = create_server_app(MemoryStore(), launcher=ThreadLauncher(), base_dir=tmp_path)
    body = '{"config": {"dataset": {"task": "word_problems"}, "x": '
    body += '{"a": ' * depth + "1" + "}" * depth + "}}"
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.post(
            "/api/jobs", content=body, headers={"content-type": "application/json"}
        )
    assert answer.status_code == 400, answer.text
    assert "Traceback" not in answer.text

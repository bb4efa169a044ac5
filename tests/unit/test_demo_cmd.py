"""``emery demo``: runs the packaged main job and prints the test-split lift and the prompt."""

from __future__ import annotations

import tomllib
from pathlib import Path

import jobs_support as js
import pytest

from emery.cli import demo_cmd
from emery.cli.app import main
from emery.config import parse_config
from emery.core.models import Candidate, Demo

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else 0


FAKE_DEMO = """
[job]
name = "demo"
algorithm = "random_search"
seed = 3

[job.budget]
metric_calls = 60

[dataset]
task = "word_problems"
n_train = 6
n_val = 8
n_test = 10

[lm.task]
model = "python/jobs_support:task_lm"

[lm.reflection]
model = "python/jobs_support:reflection_lm"

[algorithm.random_search]
iterations = 4
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    monkeypatch.setenv("PYTHONPATH", js.worker_env()["PYTHONPATH"])


def test_the_packaged_demo_config_is_valid() -> None:
    data = tomllib.loads(demo_cmd.demo_config_text())
    config = parse_config(data, "demo")
    assert config.dataset.task == "word_problems"
    assert config.lm.task.model == "local/qwen2.5-coder-0.5b"
    assert config.job.budget.metric_calls is not None
    assert config.dataset.n_test
    assert config.dataset.n_test >= 30


def test_demo_prints_test_lift_prompt_budget_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo_cmd, "demo_config_text", lambda: FAKE_DEMO)
    assert run_cli(["demo", "--stream-format", "none"]) == 0
    printed = capsys.readouterr().out
    assert "Test split, never used during the search: 10 examples" in printed
    assert "baseline prompt" in printed
    assert "optimized prompt" in printed
    assert "lift" in printed
    assert "[solve instruction]" in printed
    assert "metric calls" in printed
    html = next((tmp_path / "results").glob("demo-*.html"))
    assert str(html) in printed
    assert html.read_text().startswith("<!doctype html>")

    # A second run with the same seed gives the same numbers (from the stores' caches).
    assert run_cli(["demo", "--stream-format", "none"]) == 0
    again = capsys.readouterr().out
    score_lines = [line for line in printed.splitlines() if "prompt  " in line]
    assert score_lines == [line for line in again.splitlines() if "prompt  " in line]


def test_demo_names_the_command_that_installs_a_missing_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path / "no-models"))
    assert run_cli(["demo"]) == 2
    error = capsys.readouterr().err
    assert "emery models pull qwen2.5-coder-0.5b" in error
    assert not (tmp_path / ".emery" / "emery.db").exists()  # nothing created


def test_the_prompt_shows_instruction_and_demos_as_turns() -> None:
    demo = Demo(inputs={"question": "2 + 3?"}, output="Add them.\n\n2 + 3 = 5\nAnswer: 5")
    candidate = Candidate(components={"solve": "Add."}, demos={"solve": (demo,)})
    assert demo_cmd._prompt(candidate) == [
        "  [solve instruction]",
        "    Add.",
        "  [solve demo 1]",
        "    user> question: 2 + 3?",
        "    assistant> Add them.",
        "",
        "               2 + 3 = 5",
        "               Answer: 5",
    ]

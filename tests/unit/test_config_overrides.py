"""Changing a config from the command line (--set, --model, --dataset) and .env files, on
``emery train`` and ``emery eval``."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from bad_input_support import job_config, one_error_line, run_cli

from emery.config.env_file import parse_env
from emery.config.overrides import Overrides, parse_assignment
from emery.core.errors import ConfigError

ANSWER_LM = "python/scripted_lm:answer_lm"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def stored_job(store: Path) -> tuple[str, dict[str, object]]:
    """The only job's name and stored config."""
    with sqlite3.connect(store) as db:
        (name, config), *more = db.execute("SELECT name, config FROM jobs").fetchall()
    assert not more
    return name, json.loads(config)


# --- the override rules -------------------------------------------------------------------


def test_values_read_as_toml_when_they_parse_else_as_text() -> None:
    assert parse_assignment("job.budget.metric_calls=50") == (("job", "budget", "metric_calls"), 50)
    assert parse_assignment("runtime.cache=false")[1] is False
    assert parse_assignment('job.name="true"')[1] == "true"
    assert parse_assignment("lm.task.model=openai/gpt-4o-mini")[1] == "openai/gpt-4o-mini"
    assert parse_assignment("verifier={kind = 'f1'}")[1] == {"kind": "f1"}


@pytest.mark.parametrize("item", ["job.name", "=3", "job..name=x", "job.name.=x"])
def test_a_set_without_a_dotted_key_and_value_is_refused(item: str) -> None:
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_assignment(item)


def test_overrides_leave_the_given_data_alone_and_replace_the_dataset_source(
    tmp_path: Path,
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"question": "q", "expected": 1}\n')
    given = {"dataset": {"task": "word_problems", "n_test": 3}, "lm": {"task": {"model": "a"}}}
    changed = Overrides(sets=("lm.task.model=c",), model="b", dataset=str(data)).apply(given)
    assert changed["dataset"] == {"path": str(data.resolve()), "n_test": 3}
    assert changed["lm"]["task"]["model"] == "c"  # --set comes last
    assert given["dataset"]["task"] == "word_problems"


def test_env_file_syntax() -> None:
    text = (
        "# keys\n\nexport OPENAI_API_KEY=sk-1 # a comment\nA='single # kept'\n"
        'B="line\\nbreak \\"q\\""  # note\nC=\nD = spaced\n'
    )
    assert parse_env(text, ".env") == {
        "OPENAI_API_KEY": "sk-1",
        "A": "single # kept",
        "B": 'line\nbreak "q"',
        "C": "",
        "D": "spaced",
    }


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("A=1\nnot a pair\n", ".env:2: expected KEY=VALUE"), ('A="open\n', ".env:1: the value's")],
)
def test_bad_env_lines_name_the_line(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_env(text, ".env")


# --- emery train ----------------------------------------------------------------------------


def test_train_set_model_and_dataset(tmp_path: Path) -> None:
    config = job_config(tmp_path, model="local/nope")  # would fail without --model
    store = tmp_path / "s.db"
    args = ["train", str(config), "--model", ANSWER_LM, "--dataset", "intent"]
    args += ["--set", "job.name=from-cli", "--set", "dataset.n_test=2", "--store", str(store)]
    assert run_cli(args) == 0
    name, stored = stored_job(store)
    assert name == "from-cli"
    assert stored["lm"]["task"]["model"] == ANSWER_LM  # type: ignore[index]
    assert stored["dataset"]["task"] == "intent"  # type: ignore[index]
    assert stored["dataset"]["n_test"] == 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("option", "fragments"),
    [
        ("job.budget.metric_calls=lots", ["job.budget.metric_calls", "integer"]),
        ("job.bugdet.metric_calls=5", ["unknown key 'job.bugdet'", "did you mean 'budget'?"]),
        ("job.budget.metric_calls=-1", ["job.budget.metric_calls", "greater than or equal"]),
        ("job.name.first=x", ["--set job.name.first=x: job.name is"]),
        ("metric_calls", ["expected KEY=VALUE"]),
    ],
)
def test_train_bad_set_is_one_error_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, fragments: list[str]
) -> None:
    config = tmp_path / "job.toml"
    config.write_text(job_config(tmp_path).read_text() + '\n[job]\nname = "n"\n')
    store = tmp_path / "s.db"
    assert run_cli(["train", str(config), "--set", option, "--store", str(store)]) == 2
    line = one_error_line(capsys.readouterr().err)
    for fragment in fragments:
        assert fragment in line
    assert not store.exists()


def test_train_unknown_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(job_config(tmp_path))
    assert run_cli(["train", config, "--dataset", "rows.jsonl"]) == 2
    assert "--dataset rows.jsonl: data file not found" in one_error_line(capsys.readouterr().err)
    assert run_cli(["train", config, "--dataset", "chess"]) == 2
    assert "unknown built-in task 'chess'" in one_error_line(capsys.readouterr().err)


def test_train_reads_dot_env_without_overriding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMERY_TEST_SET", "from the shell")
    monkeypatch.setenv("EMERY_TEST_NEW", "")
    monkeypatch.delenv("EMERY_TEST_NEW")  # restored to unset after the test
    (tmp_path / ".env").write_text("EMERY_TEST_SET=from-file\nEMERY_TEST_NEW='from file'\n")
    assert run_cli(["train", str(job_config(tmp_path)), "--store", str(tmp_path / "s.db")]) == 0
    assert os.environ["EMERY_TEST_SET"] == "from the shell"
    assert os.environ["EMERY_TEST_NEW"] == "from file"


def test_env_file_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EMERY_TEST_KEY", "")
    monkeypatch.delenv("EMERY_TEST_KEY")
    (tmp_path / "keys.env").write_text("# API keys\nEMERY_TEST_KEY=secret\n")
    args = ["eval", "--task", "word_problems", "--model", ANSWER_LM, "--limit", "1", "--json"]
    assert run_cli([*args, "--env-file", str(tmp_path / "keys.env")]) == 0
    assert os.environ["EMERY_TEST_KEY"] == "secret"
    assert run_cli([*args, "--env-file", "missing.env"]) == 2
    assert "--env-file missing.env: file not found" in one_error_line(capsys.readouterr().err)
    (tmp_path / ".env").write_text("OPENAI_API_KEY sk-oops\n")
    assert run_cli(args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert ".env:1: expected KEY=VALUE" in line
    assert "sk-oops" not in line.split("'OPENAI_API_KEY")[0]


# --- emery eval -----------------------------------------------------------------------------


def test_eval_set_and_dataset_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(f'{{"question": "{n}+0?", "expected": {n}}}\n' for n in range(8)))
    config = str(job_config(tmp_path))
    args = ["eval", config, "--dataset", str(rows), "--set", "dataset.n_test=8", "--json"]
    args += ["--set", "dataset.split = {train = 0, val = 0, test = 1}"]
    args += ["--set", "dataset.n_train=0", "--set", "dataset.n_val=0"]
    assert run_cli(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dataset"] == "rows"
    assert report["summary"]["n"] == 8


def test_eval_dataset_without_config(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", "--dataset", "intent", "--model", ANSWER_LM, "--limit", "3", "--json"]
    assert run_cli(args) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["n"] == 3


def test_eval_bad_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["eval", str(job_config(tmp_path)), "--set", "dataset.n_tset=2"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "unknown key 'dataset.n_tset'" in line
    assert "(with command-line overrides)" in line

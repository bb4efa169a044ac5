"""``emery init``: a commented config for a data file or a built-in task that ``emery train``
and ``emery eval`` accept as written."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest
from bad_input_support import one_error_line, run_cli

from emery.cli import init_cmd
from emery.config.loading import load_config

ANSWER_LM = "python/scripted_lm:answer_lm"
SMALL = ["--model", ANSWER_LM, "--set", "job.budget.metric_calls=8"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(init_cmd, "interactive", lambda: False)


def init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[dict, str]:  # type: ignore[type-arg]
    """Run ``emery init ARGS``; the config it wrote (checked by load_config) and stderr."""
    assert run_cli(["init", *args]) == 0
    stderr = capsys.readouterr().err
    load_config("emery.toml")
    return tomllib.loads(Path("emery.toml").read_text()), stderr


def trains(*extra: str) -> None:
    assert run_cli(["train", "emery.toml", *SMALL, "--store", "s.db", *extra]) == 0


def stage(config: dict) -> dict:  # type: ignore[type-arg]
    stages: list[dict] = config["system"]["stages"]  # type: ignore[type-arg]
    assert len(stages) == 1
    return stages[0]


def test_jsonl_with_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"id": f"r{n}", "question": f"What is {n} + 1?", "answer": n + 1} for n in range(16)]
    (tmp_path / "sums.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    config, stderr = init(capsys, "sums.jsonl")
    assert config["dataset"]["path"] == "sums.jsonl"
    assert config["dataset"]["fields"] == {"input_fields": ["question"], "expected_field": "answer"}
    assert config["dataset"]["split"] == {"train": 0.5, "val": 0.25, "test": 0.25}
    assert config["verifier"] == {"kind": "numeric"}
    assert stage(config)["instruction"] == (
        "Given the question, give the answer. End your reply with 'Answer: <number>'."
    )
    assert config["lm"]["task"]["model"] == "local/qwen2.5-coder-0.5b"
    assert "no terminal" in stderr
    assert "shuffled with dataset.seed" in Path("emery.toml").read_text()
    trains()


def test_csv_labels_with_a_split_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["text,label,split"]
    for n in range(12):
        split = ("train", "val", "test")[n % 3]
        word, label = ("good", "pos") if n % 2 else ("bad", "neg")
        lines.append(f'"review number {n}, quite {word}",{label},{split}')
    (tmp_path / "reviews.csv").write_text("\n".join(lines) + "\n")
    config, _ = init(capsys, "reviews.csv", "-o", "emery.toml")
    assert config["verifier"] == {"kind": "normalized"}
    assert stage(config)["instruction"].endswith("Reply with only the label, one of: neg, pos.")
    assert "split" not in config["dataset"]  # the file says every row's split
    assert "the file's split column: 4 train, 4 val, 4 test" in Path("emery.toml").read_text()
    trains()


def test_csv_asks_for_the_output_column_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = ["review,stars"] + [f"great stuff {n},{n % 5}" for n in range(10)]
    (tmp_path / "stars.csv").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(init_cmd, "interactive", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO("stars\nRate the review from 0 to 4.\n"))
    config, _ = init(capsys, "stars.csv")
    assert config["dataset"]["fields"]["expected_field"] == "stars"
    assert config["verifier"] == {"kind": "numeric"}
    assert stage(config)["instruction"].startswith("Rate the review from 0 to 4. End your")
    assert run_cli(["eval", "emery.toml", "--model", ANSWER_LM, "--json"]) == 0


def test_task_set_with_json_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = [{"id": f"t{n}", "input": {"note": f"Ann, {20 + n}, Oslo"}} for n in range(12)]
    gold = {f"t{n}": {"name": "Ann", "age": 20 + n} for n in range(12)}
    task_set = {"metadata": {"name": "people", "description": "Extract the person."}}
    task_set |= {"tasks": tasks, "gold_outputs": gold}
    (tmp_path / "people.json").write_text(json.dumps(task_set))
    config, _ = init(capsys, "people.json")
    assert "fields" not in config["dataset"]
    assert config["verifier"] == {"kind": "json_object"}
    assert stage(config)["parser"] == {"kind": "json_object"}
    assert stage(config)["instruction"] == (
        "Extract the person. Reply with a JSON object with the keys name, age and nothing else."
    )
    assert stage(config)["messages"] == [{"template": "{note}"}]
    trains()


def test_task_set_verifier_and_free_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = [{"id": f"t{n}", "input": {"country": f"Country {n}"}} for n in range(12)]
    gold = [{"task_id": f"t{n}", "output": f"The capital city number {n}"} for n in range(12)]
    meta = {"name": "capitals", "description": "Name the capital.", "verifier": "contains"}
    (tmp_path / "capitals.json").write_text(
        json.dumps({"metadata": meta, "tasks": tasks, "gold_outputs": gold})
    )
    config, _ = init(capsys, "capitals.json")
    assert config["verifier"] == {"kind": "contains"}  # the task set's own
    Path("emery.toml").unlink()
    meta.pop("verifier")
    (tmp_path / "capitals.json").write_text(
        json.dumps({"metadata": meta, "tasks": tasks, "gold_outputs": gold})
    )
    config, _ = init(capsys, "capitals.json")
    assert config["verifier"] == {"kind": "f1"}
    assert '# kind = "rubric"' in Path("emery.toml").read_text()
    trains()


def test_builtin_task(capsys: pytest.CaptureFixture[str]) -> None:
    config, _ = init(capsys, "intent")
    assert config["dataset"] == {"task": "intent"}
    assert config["verifier"] == {"kind": "normalized"}
    assert stage(config)["name"] == "classify"
    trains("--set", "dataset.n_val=4", "--set", "dataset.n_test=4")


def test_no_data_without_a_terminal_uses_a_builtin_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config, stderr = init(capsys)
    assert config["dataset"] == {"task": "word_problems"}
    assert "no DATA given" in stderr


@pytest.mark.parametrize(
    ("content", "name", "fragment"),
    [
        (None, "missing.jsonl", "missing.jsonl: data file not found"),
        ("", "empty.jsonl", "the dataset has no rows"),
        ('{"q": 1, "answer": 2}\nnot json\n', "broken.jsonl", "broken.jsonl:2: invalid JSON"),
        ("q,answer\n1,2,3\n", "wide.csv", "more values than header columns"),
        ('{"a": 1}\n', "one.jsonl", "an input column and a gold output column"),
        (None, "chess", "unknown built-in task 'chess'"),
    ],
)
def test_bad_data_is_one_error_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    name: str,
    fragment: str,
) -> None:
    if content is not None:
        (tmp_path / name).write_text(content)
    assert run_cli(["init", name]) == 2
    assert fragment in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "emery.toml").exists()


def test_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("emery.toml").write_text("# mine\n")
    assert run_cli(["init", "intent"]) == 2
    assert "pass --force" in one_error_line(capsys.readouterr().err)
    assert Path("emery.toml").read_text() == "# mine\n"
    assert run_cli(["init", "intent", "--force"]) == 0
    assert load_config("emery.toml").dataset.task == "intent"

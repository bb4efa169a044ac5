"""The ``emery`` command line: exit codes, one-line errors, and a full ``eval`` run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_models import fake_answer

from emery.cli.app import main
from emery.data.tasks import builtin_task

N_TEST = 8


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else (0 if code is None else 1)


def assert_one_line_error(stderr: str, *fragments: str, alone: bool = False) -> None:
    """The error is one line starting with ``error:``, last on stderr, with no traceback.

    ``alone``: nothing else was printed (the error came before any progress output).
    """
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, stderr
    assert lines[-1] == errors[0], stderr
    if alone:
        assert lines == errors, stderr
    for fragment in fragments:
        assert fragment in errors[0], stderr


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in a scratch directory with an empty model directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path / "models"))


def write_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "job.toml"
    path.write_text(
        f"""
[dataset]
task = "word_problems"
n_train = 0
n_val = 0
n_test = {N_TEST}

[lm.task]
model = "python/fake_models:word_problem_lm"

[runtime]
workdir = "{(tmp_path / "work").as_posix()}"
concurrency = 3
{extra}
"""
    )
    return path


def expected_mean() -> float:
    test = builtin_task("word_problems").dataset(n_train=0, n_val=0, n_test=N_TEST).test
    right = [fake_answer(e.input["question"]) == e.expected for e in test]
    return float(sum(right)) / len(right)


def test_expected_mean_is_between_zero_and_one() -> None:
    # Guards the full-run tests below: the fake must be neither always right nor always wrong.
    assert 0.0 < expected_mean() < 1.0


def test_eval_without_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["eval"]) == 2
    assert_one_line_error(capsys.readouterr().err, "give a CONFIG file or --task", alone=True)


def test_eval_with_config_and_task(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run_cli(["eval", str(write_config(tmp_path)), "--task", "intent"]) == 2
    assert_one_line_error(capsys.readouterr().err, "not both")


def test_missing_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "job.toml"
    assert run_cli(["eval", str(missing)]) == 2
    assert_one_line_error(capsys.readouterr().err, str(missing), "not found", alone=True)


def test_unknown_config_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text('[datset]\ntask = "word_problems"\n')
    assert run_cli(["eval", str(path)]) == 2
    assert_one_line_error(
        capsys.readouterr().err, "unknown key 'datset'", "did you mean 'dataset'?", alone=True
    )


def test_unknown_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run_cli(["eval", "--task", "word_problems", "--model", "local/nope", "--limit", "2"]) == 2
    )
    assert_one_line_error(capsys.readouterr().err, "unknown local model 'nope'")


def test_model_not_pulled_names_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run_cli(["eval", "--task", "intent", "--model", "local/smollm2-135m", "--limit", "1"]) == 2
    )
    assert_one_line_error(capsys.readouterr().err, "emery models pull smollm2-135m")


def test_unknown_task(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["eval", "--task", "chess"]) == 2
    assert_one_line_error(capsys.readouterr().err, "unknown built-in task 'chess'")


def test_bad_split(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["eval", "--task", "intent", "--split", "holdout"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--split must be train, val or test")


def test_error_text_in_brackets_is_printed_literally(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.jsonl").write_text('{"question": "q", "expected": "a"}\n')
    path = tmp_path / "job.toml"
    path.write_text('[dataset]\npath = "d.jsonl"\n[algorithm.gepx]\n')
    assert run_cli(["train", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "unknown algorithm in [algorithm.gepx]")


def test_full_eval_run_writes_the_result(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "out" / "result.json"
    assert run_cli(["eval", str(write_config(tmp_path)), "--output", str(output)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert f"{N_TEST} examples" in captured.out
    assert str(output) in captured.out.replace("\n", "")

    report = json.loads(output.read_text())
    assert report["summary"]["n"] == N_TEST
    assert report["summary"]["mean"] == pytest.approx(expected_mean())
    assert report["split"] == "test"
    assert report["dataset"] == "word_problems"
    assert len(report["results"]) == N_TEST
    assert report["candidate"]["components"] == {"solve": "Answer the question."}
    assert report["usage"]["task"]["calls"] == N_TEST
    assert (tmp_path / "work" / "lm_cache.db").is_file()


def test_json_output_is_parseable_and_reruns_hit_the_cache(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = str(write_config(tmp_path))
    output = tmp_path / "result.json"
    assert run_cli(["eval", config, "--json", "--output", str(output)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["summary"]["n"] == N_TEST
    assert first["summary"]["mean"] == pytest.approx(expected_mean())
    assert first["output"] == str(output)
    assert "results" not in first
    assert first["usage"]["task"]["cache_hits"] == 0

    assert run_cli(["eval", config, "--json", "--output", str(output)]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["summary"] == first["summary"]
    assert second["usage"]["task"]["cache_hits"] == N_TEST
    assert second["usage"]["task"]["prompt_tokens"] == 0


def test_limit_and_default_output_location(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run_cli(["eval", str(write_config(tmp_path)), "--json", "--limit", "3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["summary"]["n"] == 3
    written = Path(result["output"])
    assert written.parent == tmp_path / "results"
    assert written.name.startswith("eval-word_problems-test-")
    assert written.is_file()


def test_failures_flag_lists_failed_examples(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "r.json"
    assert (
        run_cli(["eval", str(write_config(tmp_path)), "--failures", "--output", str(output)]) == 0
    )
    out = capsys.readouterr().out
    failed = [r for r in json.loads(output.read_text())["results"] if r["score"] < 1.0]
    assert failed
    for result in failed:
        assert result["example_id"] in out


def test_models_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["models", "list", "--json"]) == 0
    models = json.loads(capsys.readouterr().out)
    names = {model["name"] for model in models}
    assert {"smollm2-135m", "qwen2.5-coder-0.5b"} <= names
    assert all(model["installed"] is False for model in models)


def test_models_list_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "smollm2" in out
    assert "qwen2.5" in out


def test_models_pull_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["models", "pull", "unknown"]) == 2
    assert_one_line_error(capsys.readouterr().err, "unknown local model 'unknown'", "smollm2-135m")


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "No such command 'frobnicate'" in err
    assert "Traceback" not in err
    assert run_cli(["eval", "--limit", "0", "--task", "intent"]) == 2
    assert "--limit" in capsys.readouterr().err


def test_invalid_regexes_are_config_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    parser = write_config(
        tmp_path,
        """
[[system.stages]]
name = "solve"
messages = [{ template = "{question}" }]
parser = { kind = "regex", pattern = "Answer: (\\\\d+" }
""",
    )
    assert run_cli(["eval", str(parser)]) == 2
    assert_one_line_error(capsys.readouterr().err, "parser.pattern", "not a valid regex")

    verifier = write_config(tmp_path, '[verifier]\nkind = "regex"\npattern = "(oops"\n')
    assert run_cli(["eval", str(verifier)]) == 2
    assert_one_line_error(capsys.readouterr().err, "verifier.pattern", "not a valid regex")
